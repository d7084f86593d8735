"""The playground pages: roles, tenancy (another client's run is 404 on every URL), starting a
run, the live event stream, replay from the stored trace, stop."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from apps.billing.models import UsagePurpose, UsageRecord
from apps.conversations.services import conversation_create
from apps.playground import streams
from apps.playground.models import PlaygroundRun, RunStatus
from tests.playground.fixtures import make_run

pytestmark = pytest.mark.django_db


def url(name: str, client, *args) -> str:
    return reverse(name, args=args) + f"?client={client.slug}"


def events(response) -> list[tuple[str, dict]]:
    body = b"".join(response.streaming_content).decode()
    found = []
    for block in body.split("\n\n"):
        lines = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and line[0] != ":"
        )
        if "event" in lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


def test_an_agent_starts_a_run_that_executes_off_the_request(
    agent, client_a, settings, django_capture_on_commit_callbacks
):
    settings.OPENAI_API_KEY = ""  # the offline demo model
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post(
            url("playground-start", client_a),
            {"question": "What are your opening hours?", "mode": "adaptive"},
        )
    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert response.status_code == 302
    assert response["Location"] == url("playground-run", client_a, run.public_id)
    run.refresh_from_db()
    assert (run.client, run.created_by, run.status) == (client_a, agent.staff_user, RunStatus.DONE)
    assert run.trace.llm_calls >= 1
    assert UsageRecord.objects.filter(client=client_a, purpose=UsagePurpose.PLAYGROUND).exists()

    page = agent.get(url("playground-run", client_a, run.public_id))
    assert page.status_code == 200
    assert "Tools never run in the playground" in page.content.decode()


def test_the_form_refuses_bad_input_with_the_field_named(agent, client_a):
    response = agent.post(url("playground-start", client_a), {"question": " ", "mode": "turbo"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "This field is required." in body and "Select a valid choice" in body
    assert PlaygroundRun.objects.unscoped("test checks the database directly").count() == 0


def test_a_viewer_watches_and_replays_but_cannot_start_or_stop(viewer, client_a):
    run = make_run(client_a, status=RunStatus.RUNNING)
    index = viewer.get(url("playground", client_a))
    assert index.status_code == 200
    assert "starting one" in index.content.decode() and "<textarea" not in index.content.decode()
    assert viewer.get(url("playground-run", client_a, run.public_id)).status_code == 200
    assert (
        viewer.post(
            url("playground-start", client_a), {"question": "hi", "mode": "adaptive"}
        ).status_code
        == 403
    )
    assert viewer.post(url("playground-run-stop", client_a, run.public_id)).status_code == 403
    run.refresh_from_db()
    assert (
        not run.stop_requested
        and PlaygroundRun.objects.unscoped("test checks the database directly").count() == 1
    )


def test_another_clients_run_is_404_on_every_playground_url(agent, client_a, client_b):
    theirs = make_run(client_b, status=RunStatus.RUNNING, question="Their secret question")
    for name, method in [
        ("playground-run", "get"),
        ("playground-run-events", "get"),
        ("playground-run-stop", "post"),
    ]:
        response = getattr(agent, method)(url(name, client_a, theirs.public_id))
        assert response.status_code == 404, name
    theirs.refresh_from_db()
    assert not theirs.stop_requested and theirs.status == RunStatus.RUNNING
    assert "Their secret question" not in agent.get(url("playground", client_a)).content.decode()
    # and choosing their client by slug is refused like an unknown one
    assert agent.get(url("playground", client_b)).status_code == 404
    assert agent.get(url("playground-run", client_b, theirs.public_id)).status_code == 404


def test_another_clients_conversation_cannot_be_the_context(agent, client_a, client_b):
    theirs, _ = conversation_create(client=client_b)
    response = agent.post(
        url("playground-start", client_a),
        {"question": "hi", "mode": "adaptive", "conversation": str(theirs.public_id)},
    )
    assert response.status_code == 400
    assert PlaygroundRun.objects.unscoped("test checks the database directly").count() == 0


def test_the_stream_sends_every_step_in_order_then_the_run_then_end(agent, client_a):
    run = make_run(client_a)
    response = agent.get(url("playground-run-events", client_a, run.public_id))
    assert response["Content-Type"].startswith("text/event-stream")
    got = events(response)
    steps = [data for kind, data in got if kind == "step"]
    assert [s["index"] for s in steps] == list(range(len(steps)))
    assert steps[0]["name"] == "reason_step" and steps[0]["output"]["scores"]["grounded"] == 0.5
    assert got[-2][0] == "run" and got[-2][1]["status"] == "done"
    assert got[-2][1]["cost_usd"] == "0.00120000" and got[-2][1]["llm_calls"] == run.trace.llm_calls
    assert got[-1] == ("end", {"status": "done"})


def test_the_stream_resumes_after_the_last_event_id(agent, client_a):
    run = make_run(client_a)
    response = agent.get(
        url("playground-run-events", client_a, run.public_id), HTTP_LAST_EVENT_ID="9"
    )
    steps = [data["index"] for kind, data in events(response) if kind == "step"]
    assert steps == list(range(10, run.trace.steps.count()))


def test_a_live_stream_follows_a_running_run(agent, client_a, monkeypatch):
    """The stream polls the stored steps: a step recorded while it is open is sent, and it ends
    once the run has finished."""
    monkeypatch.setattr(streams, "POLL_SECONDS", 0)
    run = make_run(client_a, status=RunStatus.RUNNING)
    polls = {"n": 0}
    original = streams.RunCursor.poll

    def poll(self, *, client, run_id):
        polls["n"] += 1
        if polls["n"] == 3:
            PlaygroundRun.objects.unscoped("test checks the database directly").filter(
                pk=run_id
            ).update(status=RunStatus.DONE)
        return original(self, client=client, run_id=run_id)

    monkeypatch.setattr(streams.RunCursor, "poll", poll)
    got = events(agent.get(url("playground-run-events", client_a, run.public_id)))
    assert got[-1] == ("end", {"status": "done"})
    assert [d["status"] for k, d in got if k == "run"] == ["running", "done"]


def test_replay_plays_the_stored_trace_without_any_llm_call(agent, client_a, monkeypatch, llm):
    monkeypatch.setattr(streams, "REPLAY_STEP_SECONDS", 0)
    run = make_run(client_a)
    before = UsageRecord.objects.unscoped("test checks the database directly").count()
    response = agent.get(url("playground-run-events", client_a, run.public_id) + "&replay=1")
    got = events(response)
    steps = [d for k, d in got if k == "step"]
    assert len(steps) == run.trace.steps.count()
    runs = [d for k, d in got if k == "run"]
    assert runs[0]["status"] == "replaying" and runs[0]["llm_calls"] == 0
    assert [r["llm_calls"] for r in runs[1:-1]] == sorted(r["llm_calls"] for r in runs[1:-1])
    assert runs[-1]["status"] == "done" and got[-1][0] == "end"
    assert (
        llm.calls() == []
        and UsageRecord.objects.unscoped("test checks the database directly").count() == before
    )
    page = agent.get(url("playground-run", client_a, run.public_id) + "&replay=1")
    assert "replay=1" in page.content.decode()


def test_stop_flags_a_running_run_and_says_so(agent, client_a):
    run = make_run(client_a, status=RunStatus.RUNNING)
    response = agent.post(
        url("playground-run-stop", client_a, run.public_id), HTTP_ACCEPT="application/json"
    )
    assert response.json() == {"stopping": True}
    run.refresh_from_db()
    assert run.stop_requested
    done = make_run(client_a)
    response = agent.post(
        url("playground-run-stop", client_a, done.public_id), HTTP_ACCEPT="application/json"
    )
    assert response.json() == {"stopping": False}


def test_signed_out_requests_go_to_sign_in_or_get_401(client, client_a):
    run = make_run(client_a)
    assert client.get(url("playground", client_a)).status_code == 302
    assert client.get(url("playground-run-events", client_a, run.public_id)).status_code == 401
    assert client.post(url("playground-run-stop", client_a, run.public_id)).status_code == 401
