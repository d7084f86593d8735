"""A support lead, in a real browser, picks last week's escalated conversations in the admin,
replays them against deliberative with the support rubric, and reads the report: both sides,
each conversation's change, what it would cost — and the transcript behind a case."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from apps.accounts.models import Role
from apps.clients.models import Rubric
from apps.clients.rubrics import SUPPORT
from apps.escalations.models import EscalationReason
from apps.escalations.services import escalation_create
from apps.simulations.models import SimulationRun
from tests.api.conftest import make_conversation_with_turn
from tests.browser.helpers import page_signed_in_as, shot
from tests.factories import MembershipFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def lead_page(browser: Any, live_server: Any, client: Any) -> Any:
    """A signed-in support lead (agent role) of `client`."""
    user = MembershipFactory(client=client, role=Role.AGENT).user
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label__in=["simulations", "conversations", "reasoning"]
        )
    )
    return page_signed_in_as(
        browser, live_server.url, user, viewport={"width": 1400, "height": 900}
    )


def test_a_lead_replays_escalations_against_deliberative_and_reads_the_report(
    browser, live_server, demo, db_lock, screenshots
):
    with db_lock:
        # The built-in rubrics come with a migration; an earlier transactional test's flush
        # may have emptied the table.
        fields = {f.name for f in Rubric._meta.get_fields()}
        Rubric.objects.get_or_create(
            slug=SUPPORT["slug"], defaults={k: v for k, v in SUPPORT.items() if k in fields}
        )
        # Deliberative is beyond the demo's adaptive plan: a platform operator grants it
        # (simulations stay within the plan otherwise).
        demo.playground_modes = ["deliberative"]
        demo.save(update_fields=["playground_modes"])
        for text in ("Where is my order TH-10042?", "I want to talk to a human"):
            conversation, _trace = make_conversation_with_turn(demo, text)
            escalation_create(
                client=demo,
                conversation=conversation,
                reason=EscalationReason.CUSTOMER_REQUEST,
                detail="Customer asked for a human.",
                notify=False,
            )
    page = lead_page(browser, live_server, demo)

    page.goto(f"{live_server.url}/admin/simulations/simulationrun/add/")
    page.get_by_role("radio", name="Replay of saved conversations").check()
    page.locator("#id_preset").select_option("last_week_escalated")
    page.locator("#id_mode").select_option("deliberative")
    page.locator("#id_rubric").select_option("support")
    page.locator("#id_name").fill("Escalations vs deliberative")
    shot(page, screenshots, "simulation-new.png")
    page.get_by_role("button", name="Start the simulation").click()

    content = page.locator("#content-main[data-run]")
    expect(content).to_have_attribute("data-status", "done", timeout=120_000)
    expect(page.locator("#run-progress")).to_have_attribute("value", "100")
    sides = page.locator("#report-sides")
    expect(sides).to_contain_text("Baseline (live)")
    expect(sides).to_contain_text("Candidate")
    expect(sides).to_contain_text("Cost per conversation")
    expect(page.locator("#report-ratio")).to_contain_text("Model calls per turn")
    expect(page.locator("#report-judged")).to_contain_text("the model's opinion")
    rows = page.locator("#report-cases tbody tr[data-case]")
    expect(rows).to_have_count(2)
    for change in rows.evaluate_all("rows => rows.map(r => r.dataset.change)"):
        assert change in {"fixed", "broke", "unchanged"}
    shot(page, screenshots, "simulation-report.png")

    with db_lock:
        run = SimulationRun.objects.for_client(demo).get()
        assert run.kind == "replay" and run.candidate_overrides["mode"] == "deliberative"
        assert run.candidate_overrides["rubric"] == "support"

    rows.first.get_by_role("link", name="transcript").last.click()
    expect(page.locator("#transcript")).to_contain_text("Customer")
    expect(page.locator("#transcript tbody tr").first).to_be_visible()
    shot(page, screenshots, "simulation-transcript.png")
    assert page.errors == []
