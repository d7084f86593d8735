"""Run insights now: the nightly analysis over the last days up to this moment, queued on the
background queue, one run in flight per client, its progress on the proposals list; and the
first-week view of a new client. No tenant runs or sees another's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from apps.accounts.models import Role
from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.flags.models import MessageFlag
from apps.insights import services
from apps.insights.models import InsightProposal, InsightRun, RunStatus
from apps.insights.services import RUN_STEPS, insights_run_now
from devtools.fake_llm import Fail
from tests.factories import MembershipFactory
from tests.insights.conftest import escalated, ref
from tests.insights.test_gaps import searched
from tests.insights.test_insights import NORWAY, norway_topic
from tests.support.shop import make_shop

pytestmark = pytest.mark.django_db

LIST_URL = "/admin/insights/insightproposal/"
RUN_NOW_URL = "/admin/insights/insightproposal/run-now/"


def runs(client: Client) -> list[InsightRun]:
    return list(InsightRun.objects.for_client(client).filter(on_demand=True))


def test_run_now_analyses_today_so_far_on_the_background_queue(
    llm, shop, django_capture_on_commit_callbacks, monkeypatch
):
    convs = [escalated(shop, text) for text in NORWAY]  # all of them today
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    queues: list[str] = []
    apply_async = services_task().apply_async

    def spy(*args: Any, **kwargs: Any) -> Any:
        queues.append(kwargs.get("queue", ""))
        return apply_async(*args, **kwargs)

    monkeypatch.setattr(services_task(), "apply_async", spy)
    with django_capture_on_commit_callbacks(execute=True):
        run = insights_run_now(client=shop)
    assert queues == ["background"]

    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.steps_done == RUN_STEPS
    assert run.window_end > convs[-1].created_at  # today so far is in the window
    assert run.found == {"escalation": 3} and run.proposals_created == 1
    [proposal] = InsightProposal.objects.for_client(shop)
    assert proposal.run == run and proposal.count == 3


def services_task() -> Any:
    from apps.insights.tasks import run_now

    return run_now


def test_a_second_click_says_it_is_already_running(shop, webhook):
    first = insights_run_now(client=shop)  # queued: its task waits for the commit
    assert first.status == RunStatus.QUEUED
    with pytest.raises(ApplicationError, match="already running"):
        insights_run_now(client=shop)
    assert runs(shop) == [first]
    # Another client is not held up by it.
    other = make_shop("standard", webhook.url(), slug="other-shop")
    assert insights_run_now(client=other).status == RunStatus.QUEUED
    # A run abandoned longer than INSIGHTS_RUN_STALE_SECONDS no longer blocks.
    InsightRun.objects.for_client(shop).filter(pk=first.pk).update(
        updated_at=timezone.now() - timedelta(hours=2)
    )
    assert insights_run_now(client=shop).pk != first.pk


def test_a_failed_model_call_ends_the_run_failed_with_the_reason(
    llm, shop, django_capture_on_commit_callbacks
):
    for text in NORWAY:
        escalated(shop, text)
    llm.script("insights", Fail(status=500))
    with django_capture_on_commit_callbacks(execute=True):
        run = insights_run_now(client=shop)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "model call failed" in run.error


def test_an_unexpected_error_never_leaves_the_run_stuck(
    shop, django_capture_on_commit_callbacks, monkeypatch
):
    def boom(**kwargs: Any) -> Any:
        raise RuntimeError("database went away")

    monkeypatch.setattr(services, "generate_insights", boom)
    with django_capture_on_commit_callbacks(execute=True):
        run = insights_run_now(client=shop)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "database went away" in run.error
    assert insights_run_now(client=shop).status == RunStatus.QUEUED  # it can be run again


@pytest.fixture
def staff(db, webhook) -> dict[str, Any]:
    acme = make_shop("standard", webhook.url(), slug="acme-shop")
    globex = make_shop("standard", webhook.url(), slug="globex-shop")
    acme.name, globex.name = "Acme Outdoor", "Globex Gear"
    acme.save()
    globex.save()
    users = {
        role: MembershipFactory(client=acme, role=role).user for role in (Role.VIEWER, Role.ADMIN)
    }
    outsider = MembershipFactory(client=globex, role=Role.OWNER).user
    everything = list(Permission.objects.all())
    for user in [*users.values(), outsider]:
        user.user_permissions.add(*everything)
    return {"acme": acme, "globex": globex, "users": users, "outsider": outsider}


def test_an_admin_runs_insights_now_and_sees_its_progress(
    client, staff, llm, django_capture_on_commit_callbacks
):
    acme = staff["acme"]
    convs = [escalated(acme, text) for text in NORWAY]
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    client.force_login(staff["users"][Role.ADMIN])
    page = client.get(LIST_URL).content.decode()
    assert 'name="_run_now"' in page and 'data-status="none"' in page

    with django_capture_on_commit_callbacks(execute=False):  # the worker has not started yet
        response = client.post(RUN_NOW_URL, {"client": acme.pk}, follow=True)
    body = response.content.decode()
    assert "Insights for Acme Outdoor are queued" in body
    assert 'data-status="queued"' in body and 'http-equiv="refresh"' in body
    again = client.post(RUN_NOW_URL, {"client": acme.pk}, follow=True).content.decode()
    assert "already running" in again and len(runs(acme)) == 1

    [run] = runs(acme)
    run.status, run.steps_done = RunStatus.RUNNING, 1
    run.save()
    assert "Running: 1 of 3 steps done." in client.get(LIST_URL).content.decode()

    services.insights_run_queued(client=acme, run_id=run.pk)
    done = client.get(LIST_URL).content.decode()
    assert 'data-status="done"' in done and "1 new proposal(s)" in done
    assert 'http-equiv="refresh"' not in done


def test_a_viewer_sees_the_status_but_cannot_run(client, staff):
    acme = staff["acme"]
    client.force_login(staff["users"][Role.VIEWER])
    page = client.get(LIST_URL).content.decode()
    assert "Insights for Acme Outdoor" in page and 'name="_run_now"' not in page
    assert client.post(RUN_NOW_URL, {"client": acme.pk}).status_code == 404
    assert runs(acme) == []


def test_another_tenant_can_never_run_or_see_a_run(client, staff):
    acme, globex = staff["acme"], staff["globex"]
    insights_run_now(client=acme)
    client.force_login(staff["outsider"])  # the owner of the other shop
    assert client.post(RUN_NOW_URL, {"client": acme.pk}).status_code == 404
    assert len(runs(acme)) == 1
    page = client.get(LIST_URL).content.decode()
    assert "Insights for Globex Gear" in page and "Acme Outdoor" not in page
    assert 'data-status="queued"' not in page
    assert client.get(RUN_NOW_URL).status_code in {403, 405}
    assert runs(globex) == []


def test_a_new_client_sees_its_first_week_from_real_data(client, staff, settings):
    settings.INSIGHTS_KNOWLEDGE_MIN_SCORE = 0.2
    acme = staff["acme"]
    convs = [escalated(acme, text) for text in NORWAY[:2]]
    searched(acme, "Can I rent a kayak?")
    searched(acme, "can I rent a  kayak?")
    searched(acme, "Do you sell bike racks?")
    escalated(staff["globex"], "Globex customers' words stay with Globex")
    MessageFlag.objects.create(
        client=acme,
        conversation=convs[0],
        message=convs[0].messages.first(),
        flagged_by=staff["users"][Role.ADMIN],
        reason="wrong",
    )
    client.force_login(staff["users"][Role.ADMIN])
    page = client.get(LIST_URL).content.decode()
    assert "Your first week so far" in page
    assert "5 conversations" in page and "2 hand-offs to your team" in page
    assert "1 answer flagged by your team" in page and "0 proposals waiting for review" in page
    assert "rent a kayak? (asked 2 times)" in page  # the newest wording is shown
    assert "Do you sell bike racks? (asked 1 time)" in page
    assert "Globex customers" not in page

    Client.objects.filter(pk=acme.pk).update(created_at=timezone.now() - timedelta(days=8))
    assert "Your first week so far" not in client.get(LIST_URL).content.decode()


def test_the_status_block_speaks_the_staff_language(shop):
    from django.utils import translation

    from apps.insights.admin import run_status_text

    run = insights_run_now(client=shop)
    run.status, run.steps_done = RunStatus.RUNNING, 2
    with translation.override("es"):
        assert run_status_text(run) == "En curso: 2 de 3 pasos completados."
    run.status, run.error = RunStatus.FAILED, "token cap: over 6000"
    with translation.override("de"):
        assert run_status_text(run).startswith("Fehlgeschlagen:")
        assert run_status_text(run).endswith("token cap: over 6000")
