"""What the console's playground may run: the plan's mode and cheaper ones, at most the plan's
refinement rounds — or what a platform operator granted the client — and at most
PLAYGROUND_RUNS_PER_CLIENT + PLAYGROUND_RUNS_QUEUED_PER_CLIENT runs running or waiting per
client. Refusals are said to staff in words; nothing is stored or spent."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.sites import site
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from apps.clients.models import Client, Plan
from apps.core.exceptions import ApplicationError
from apps.playground.models import PlaygroundRun, RunSource, RunStatus
from apps.playground.services import playground_run_create, playground_run_stop
from tests.factories import set_deliberation

pytestmark = pytest.mark.django_db


def url(name: str, client) -> str:
    return reverse(name) + f"?client={client.slug}"


def test_a_plan_on_adaptive_cannot_run_deliberative_in_the_playground(client_a):
    assert client_a.plan.ai_mode == "adaptive"
    with pytest.raises(ApplicationError) as refused:
        playground_run_create(
            client=client_a, question="Can I return it?", mode="deliberative", iterations=10
        )
    assert refused.value.status == 403
    assert "does not include the deliberative mode" in refused.value.message
    assert "standard, adaptive" in refused.value.message
    assert not PlaygroundRun.objects.for_client(client_a).exists()
    # the plan's mode and the cheaper one are fine
    for mode in ("standard", "adaptive"):
        playground_run_create(client=client_a, question="Hi", mode=mode, enqueue=False)


def test_the_console_says_why_a_mode_beyond_the_plan_is_refused(agent, client_a):
    response = agent.post(
        url("playground-start", client_a),
        {"question": "Can I return it?", "mode": "deliberative", "iterations": "10"},
    )
    assert response.status_code == 403
    assert "Your plan does not include the deliberative mode" in response.content.decode()
    assert not PlaygroundRun.objects.for_client(client_a).exists()


def test_refinement_rounds_beyond_the_plan_are_refused(client_a):
    Plan.objects.filter(pk=client_a.plan_id).update(ai_mode="deliberative")
    set_deliberation(client_a.plan_id, refinement_iterations=2)
    client_a.refresh_from_db()
    with pytest.raises(ApplicationError) as refused:
        playground_run_create(client=client_a, question="Hi", mode="deliberative", iterations=10)
    assert refused.value.message == (
        "Your plan allows at most 2 refinement rounds in the playground."
    )
    assert refused.value.extra["fields"] == {"iterations": "At most 2."}
    run = playground_run_create(
        client=client_a, question="Hi", mode="deliberative", iterations=2, enqueue=False
    )
    assert run.iterations == 2


def test_an_operator_grant_opens_a_mode_and_more_rounds_to_one_client(client_a, client_b):
    Client.objects.filter(pk=client_a.pk).update(
        playground_modes=["deliberative"], playground_max_iterations=4
    )
    client_a.refresh_from_db()
    run = playground_run_create(
        client=client_a, question="Hi", mode="deliberative", iterations=4, enqueue=False
    )
    assert run.mode == "deliberative"
    with pytest.raises(ApplicationError):
        playground_run_create(client=client_a, question="Hi", mode="deliberative", iterations=5)
    with pytest.raises(ApplicationError):  # the grant is client_a's alone
        playground_run_create(client=client_b, question="Hi", mode="deliberative")


def test_manage_py_reason_is_the_operators_and_not_limited_by_the_plan(client_a):
    run = playground_run_create(
        client=client_a,
        question="Hi",
        mode="deliberative",
        iterations=10,
        source=RunSource.CLI,
        enqueue=False,
    )
    assert run.mode == "deliberative"


def test_a_client_admin_cannot_grant_its_own_playground_modes(client_a, django_user_model):
    owner = django_user_model.objects.create_user("owner", password="x", is_staff=True)
    request = RequestFactory().get("/admin/")
    request.user = owner
    readonly = site._registry[Client].get_readonly_fields(request, client_a)
    assert {"playground_modes", "playground_max_iterations"} <= set(readonly)


def test_runs_beyond_the_running_and_waiting_bound_are_refused(client_a, client_b, settings):
    settings.PLAYGROUND_RUNS_PER_CLIENT = 2
    settings.PLAYGROUND_RUNS_QUEUED_PER_CLIENT = 1
    for _ in range(3):
        playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)
    with pytest.raises(ApplicationError) as refused:
        playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)
    assert refused.value.status == 429
    assert refused.value.message.startswith(
        "3 playground runs are already running or waiting for this client."
    )
    assert PlaygroundRun.objects.for_client(client_a).count() == 3
    # another client's runs are its own
    playground_run_create(client=client_b, question="Hi", mode="adaptive", enqueue=False)
    # a finished run, and one dead for long, leave room
    PlaygroundRun.objects.for_client(client_a).filter(
        pk=PlaygroundRun.objects.for_client(client_a).order_by("pk").first().pk
    ).update(status=RunStatus.DONE)
    playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)
    PlaygroundRun.objects.for_client(client_a).filter(status=RunStatus.RUNNING).update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)


def test_stopping_a_waiting_run_frees_its_place_at_once(client_a, settings):
    settings.PLAYGROUND_RUNS_PER_CLIENT = 1
    settings.PLAYGROUND_RUNS_QUEUED_PER_CLIENT = 0
    waiting = playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)
    with pytest.raises(ApplicationError):
        playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)
    assert playground_run_stop(client=client_a, run=waiting)
    waiting.refresh_from_db()
    assert waiting.status == RunStatus.STOPPED and waiting.finished_at is not None
    playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)


def test_the_console_says_when_too_many_runs_wait(agent, client_a, settings):
    settings.PLAYGROUND_RUNS_PER_CLIENT = 1
    settings.PLAYGROUND_RUNS_QUEUED_PER_CLIENT = 0
    playground_run_create(client=client_a, question="Hi", mode="adaptive", enqueue=False)
    response = agent.post(url("playground-start", client_a), {"question": "Hi", "mode": "adaptive"})
    assert response.status_code == 429
    assert "Wait for one to finish, or stop one" in response.content.decode()
    assert PlaygroundRun.objects.for_client(client_a).count() == 1
