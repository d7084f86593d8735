"""The reasoning playground in a real headless Chromium (the system's /usr/bin/chromium): the
steps of a run arrive one by one over server-sent events, the sparkline draws, the refinement
states sit side by side with the critique's issue highlighted, and the stop button stops a live
run started from the form (through the real `openai` SDK against the scripted server)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from apps.clients.models import Client
from apps.playground import streams
from apps.playground.models import PlaygroundRun, RunStatus
from apps.reasoning.models import ReasoningTrace
from devtools.fake_llm import Delay
from tests.browser.conftest import SCREENSHOTS, _holding
from tests.browser.helpers import agent_page
from tests.playground.fixtures import add_step, deliberative_steps, make_run
from tests.support.shop import assess, make_shop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def locked_streams(db_lock: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The stream's reads take the test database's lock (SQLite in memory; a no-op on
    PostgreSQL), like the widget's do (tests/browser/conftest.py)."""
    for name in ("run_state", "steps_after"):
        monkeypatch.setattr(streams, name, _holding(db_lock, getattr(streams, name)))
    monkeypatch.setattr(streams, "POLL_SECONDS", 0.2)
    return db_lock


def test_steps_arrive_one_by_one_and_the_sparkline_draws(
    browser, live_server, client_a, locked_streams, monkeypatch
):
    db_lock = locked_streams
    with db_lock:
        run = make_run(client_a, status=RunStatus.RUNNING)
        run.trace.steps.all().delete()  # the page opens on a run that has not recorded anything yet
        ReasoningTrace.objects.unscoped("test checks the database directly").filter(
            pk=run.trace.pk
        ).update(llm_calls=0, prompt_tokens=0, completion_tokens=0)
        PlaygroundRun.objects.unscoped("test checks the database directly").filter(
            pk=run.pk
        ).update(progress_step=0)
        run.trace.llm_calls = run.trace.prompt_tokens = run.trace.completion_tokens = 0
    page = agent_page(browser, live_server, client_a, monkeypatch)
    page.goto(f"{live_server.url}/console/playground/runs/{run.public_id}/?client={client_a.slug}")
    expect(page.locator("[data-live]")).to_have_text("Live")
    cards = page.locator("[data-steps] > li")
    expect(cards).to_have_count(0)

    seen_points = []
    for index, (name, output, tokens) in enumerate(deliberative_steps()):
        with db_lock:
            add_step(run, index, name, output, tokens)
        if name == "reason_step":
            # each reasoning step is its own card, there before the next step exists
            expect(cards.filter(has_text=f"Step {output['step']}/10")).to_have_count(1)
            expect(cards).to_have_count(output["step"])
            expect(page.locator("[data-sparkline]")).to_have_attribute(
                "data-points", str(output["step"])
            )
            seen_points.append(page.locator(".gd-spark-dot").count())
        elif name == "feedback":
            card = cards.nth(output["step"] - 1)
            expect(card.locator(".gd-feedback")).to_contain_text(output["feedback"])
    assert seen_points == [1, 2, 3, 4]

    # the 3rd card: progress, badge, per-principle bars, rationale, feedback
    third = cards.nth(2)
    expect(third.locator(".gd-badge")).to_have_text("Continue")
    expect(third.locator(".gd-score")).to_have_count(2)
    grounded = third.locator(".gd-score", has_text="grounded").locator(".gd-bar-fill")
    assert grounded.evaluate("e => e.style.width") == "75%"
    expect(third).to_contain_text("Rationale 3.")
    expect(cards.nth(3).locator(".gd-badge")).to_have_text("Final")
    # the sparkline: 4 points and the target line at 0.75
    assert page.locator(".gd-spark-line").get_attribute("points").count(",") == 4
    expect(page.locator(".gd-spark-target")).to_have_count(1)

    # refinement side by side, the critique's issue highlighted on its quoted sentence
    row = page.locator(".gd-ref-row[data-iteration='1']")
    expect(row.locator("mark.gd-issue")).to_have_text("We always refund shipping too.")
    expect(row.locator("[data-state='final_spec']")).to_contain_text(
        "You can return it within 30 days."
    )
    expect(page.locator(".gd-ref-row[data-iteration='0'] [data-state='draft']")).to_contain_text(
        "We always refund shipping too."
    )
    expect(page.locator("[data-steps]")).to_contain_text("Termination: target_reached")
    # each card is drawn from the step views the page embeds (apps/reasoning/rendering.py)
    expect(cards.filter(has_text="Synthesize")).to_contain_text("Confidence: 8/10")
    expect(third).to_contain_text("Mean: 0.70")
    expect(cards.filter(has_text="Refinement · final spec (iteration 1)")).to_have_count(1)

    with db_lock:
        PlaygroundRun.objects.unscoped("test checks the database directly").filter(
            pk=run.pk
        ).update(status=RunStatus.DONE)
    expect(page.locator("[data-live]")).to_have_text("Finished.")
    expect(page.locator("[data-final]")).to_contain_text("You can return it within 30 days.")
    expect(page.locator("[data-calls]")).to_have_text(str(run.trace.llm_calls))
    expect(page.locator("[data-tokens]")).to_have_text(
        str(run.trace.prompt_tokens + run.trace.completion_tokens)
    )
    expect(page.locator("[data-progress]")).to_have_text("4/10")
    expect(page.locator("[data-cost]")).to_have_text("$0.001200")
    expect(page.locator("[data-stop]")).to_be_hidden()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "playground-run.png"), full_page=True)

    # replay from the stored trace: the same cards again, one by one
    monkeypatch.setattr(streams, "REPLAY_STEP_SECONDS", 0.05)
    page.get_by_role("link", name="Replay from the stored trace").click()
    expect(page.locator("[data-live]")).to_have_text("Replay finished.")
    expect(page.locator("[data-steps] > li")).to_have_count(
        len([s for s in deliberative_steps() if s[0] != "feedback"])
    )
    expect(page.locator("[data-sparkline]")).to_have_attribute("data-points", "4")
    assert page.errors == []
    page.context.close()


def test_a_run_started_from_the_form_is_watched_live_and_stopped(
    browser, live_server, locked_streams, llm, monkeypatch, settings
):
    if connection.vendor == "sqlite":
        pytest.skip("the run's own thread needs a database it can connect to on its own")
    settings.PLAYGROUND_EAGER_THREAD = True  # no broker: the run executes in a thread
    shop = make_shop("adaptive", "http://127.0.0.1:9/hook")
    llm.script(
        "assess",
        Delay(2.5, assess(confidence=4, needs_more_context=["faqs"], response="Checking.")),
        assess(response="Never asked for."),
    )
    page = agent_page(browser, live_server, shop, monkeypatch)
    page.goto(f"{live_server.url}/console/playground/?client={shop.slug}")
    page.get_by_label("Customer question").fill("Where is order TH-12345?")
    page.get_by_label("Mode").select_option("adaptive")
    page.get_by_role("button", name="Run").click()

    # the POST returned at once: the run page is up while the first model call is in flight
    expect(page.locator("[data-status]")).to_have_text("Running")
    page.get_by_role("button", name="Stop the run").click()
    expect(page.get_by_role("button", name="Stopping at the next step…")).to_be_visible()
    expect(page.locator("[data-steps] > li").first).to_contain_text("Assess")
    expect(page.locator("[data-status]")).to_have_text("Stopped by staff")
    expect(page.locator("[data-steps] > li").last).to_contain_text("Stopped")
    expect(page.get_by_role("link", name="Replay from the stored trace")).to_be_visible()

    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert run.status == RunStatus.STOPPED and run.stop_requested
    assert len(llm.calls("assess")) == 1  # the second assess was never made
    assert [s.name for s in run.trace.steps.order_by("index")] == [
        "assess",
        "context_fetch",
        "stopped",
    ]
    page.screenshot(path=str(SCREENSHOTS / "playground-stopped.png"), full_page=True)

    # the runs list has it
    page.goto(f"{live_server.url}/console/playground/?client={shop.slug}")
    expect(page.locator("table.gd-table")).to_contain_text("Where is order TH-12345?")
    expect(page.locator("table.gd-table")).to_contain_text("Stopped by staff")
    assert page.errors == []
    page.context.close()


def test_a_deliberative_run_on_the_offline_model_is_watched_to_its_answer(
    browser, live_server, locked_streams, monkeypatch, settings
):
    """The real deliberative mode (offline demo model) started from the form: its reasoning
    steps, the sparkline, the refinement and the answer arrive on the page as the run goes."""
    if connection.vendor == "sqlite":
        pytest.skip("the run's own thread needs a database it can connect to on its own")
    settings.PLAYGROUND_EAGER_THREAD = True
    settings.OPENAI_API_KEY = ""
    shop = make_shop("adaptive", "http://127.0.0.1:9/hook", slug="deep-shop")
    # an adaptive plan's playground runs deliberative only when the platform granted it
    Client.objects.filter(pk=shop.pk).update(playground_modes=["deliberative"])
    page = agent_page(browser, live_server, shop, monkeypatch)
    page.goto(f"{live_server.url}/console/playground/?client={shop.slug}")
    page.get_by_label("Customer question").fill("What is your return policy for a used stove?")
    page.get_by_label("Mode").select_option("deliberative")
    page.get_by_label("Refinement iterations").fill("2")
    page.get_by_role("button", name="Run").click()

    expect(page.locator("[data-live]")).to_have_text("Finished.", timeout=90_000)
    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    reasoning = run.trace.steps.filter(name="reason_step").count()
    assert run.status == RunStatus.DONE and reasoning >= 4
    expect(page.locator(".gd-reason")).to_have_count(reasoning)
    expect(page.locator("[data-sparkline]")).to_have_attribute("data-points", str(reasoning))
    expect(page.locator("[data-progress]")).to_have_text(f"{reasoning}/10")
    expect(page.locator("[data-refinement]")).to_be_visible()
    expect(page.locator("[data-final]")).to_contain_text("return")
    expect(page.locator("[data-calls]")).to_have_text(str(run.trace.llm_calls))
    page.screenshot(path=str(SCREENSHOTS / "playground-deliberative.png"), full_page=True)
    assert page.errors == []
    page.context.close()
