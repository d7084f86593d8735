"""A mode declares what it does — whether it streams, whether it deliberates, which token
reserve it takes, its chart colour and its admin help — and streaming, billing, the plan
admin's help and the usage charts follow the declaration. A fake mode registered here (it runs
standard's `run`) is followed by each of them, so a mode added as one module needs nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from apps.billing.charts import mode_color, mode_colors, stacked_cost_chart
from apps.billing.services import usage_record_create
from apps.billing.services.budgets import turn_token_estimate
from apps.billing.services.visitors import turn_limits_admit
from apps.clients import modes
from apps.clients.modes import Deliberation, Mode, ModeHelp, TokenReserve
from apps.conversations.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.reasoning.models import ReasoningTrace, TraceStatus
from apps.reasoning.modes import standard
from tests.factories import ClientFactory, PlanFactory
from tests.support.shop import Chat, make_shop

ANSWER = "We're open from eight to six on weekdays and from ten to four on Saturdays."

type Register = Callable[..., Mode]


@pytest.fixture
def fake_mode() -> Iterator[Register]:
    """Register a mode named `fake` that runs standard's `run` with the declarations given."""

    def register(**declared: Any) -> Mode:
        parts: dict[str, Any] = {
            "name": "fake",
            "label": "Fake — a mode declared in a test",
            "cost_rank": 15,
            "streams": False,
            "deliberates": Deliberation.NEVER,
            "token_reserve": TokenReserve.TURN,
            "color": "#123456",
            "help": ModeHelp(
                happens="Fake happens here.",
                llm_calls="fake calls",
                cost_effect="fake cost",
                note="(fake note)",
            ),
            **declared,
        }
        return modes.register(dataclasses.replace(standard.MODE, **parts))

    yield register
    modes.unregister("fake")


# Streaming -----------------------------------------------------------------------------------


@pytest.mark.parametrize("streams", [True, False])
def test_a_mode_s_reply_is_shown_as_written_only_when_it_declares_it_streams(
    fake_mode, streams, db, webhook, llm, drafts, django_capture_on_commit_callbacks
):
    fake_mode(streams=streams)
    shop = make_shop("fake", webhook.url(), slug="fake-shop")
    conversation = conversation_create(client=shop)[0]
    llm.script("respond", {"tool_call": None, "tool_params": {}, "response": ANSWER})

    [reply] = Chat(shop, conversation, django_capture_on_commit_callbacks).say("Hours?")

    assert reply.text == ANSWER
    assert ReasoningTrace.objects.get(conversation=conversation).mode == "fake"
    assert bool(drafts) is streams
    if streams:
        assert drafts[-1] == ANSWER


@pytest.mark.parametrize(
    ("streams", "deliberates", "drafting", "deliberating"),
    [
        (True, Deliberation.NEVER, True, False),
        (False, Deliberation.NEVER, False, False),
        (False, Deliberation.ALWAYS, False, True),
        (True, Deliberation.WHEN_NEEDED, True, True),
    ],
)
def test_a_mode_streams_its_deliberation_s_answer_only_when_it_deliberates(
    fake_mode, streams, deliberates, drafting, deliberating
):
    mode = fake_mode(streams=streams, deliberates=deliberates)
    assert mode.may_stream(deliberating=False) is drafting
    assert mode.may_stream(deliberating=True) is deliberating


# Billing -------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("reserve", list(TokenReserve))
def test_a_turn_reserves_the_tokens_its_mode_declares(fake_mode, settings, reserve):
    settings.BILLING_TURN_TOKEN_RESERVE = 1_111
    settings.BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE = 9_999
    fake_mode(token_reserve=reserve)
    plan = PlanFactory(ai_mode="fake", per_turn_token_cap=0)

    expected = {TokenReserve.TURN: 1_111, TokenReserve.DELIBERATIVE: 9_999}[reserve]
    assert turn_token_estimate(plan) == expected
    assert turn_token_estimate(plan, "fake") == expected


def earlier_turn(client: Any, conversation: Any, *, trigger: str) -> None:
    message = message_append(client=client, conversation=conversation, role=Role.USER, text="hi")
    trace = ReasoningTrace.objects.create(
        client=client,
        conversation=conversation,
        user_message=message,
        mode="fake",
        status=TraceStatus.DONE,
        deliberation_trigger=trigger,
    )
    usage_record_create(
        client=client,
        mode="fake",
        step="respond",
        model="gpt-4o-mini",
        prompt_tokens=100,
        completion_tokens=10,
        conversation=conversation,
        trace=trace,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("deliberates", "trigger", "capped"),
    [
        (Deliberation.NEVER, "", False),
        (Deliberation.ALWAYS, "", True),
        (Deliberation.WHEN_NEEDED, "", False),
        (Deliberation.WHEN_NEEDED, "low_confidence", True),
    ],
)
def test_the_hourly_deliberation_cap_follows_what_the_mode_declares(
    fake_mode, deliberates, trigger, capped
):
    fake_mode(deliberates=deliberates)
    client = ClientFactory(plan=PlanFactory(ai_mode="fake", deliberative_turns_per_hour=1))
    conversation = conversation_create(client=client)[0]
    earlier_turn(client, conversation, trigger=trigger)
    message = message_append(client=client, conversation=conversation, role=Role.USER, text="2")
    trace = ReasoningTrace.objects.create(
        client=client, conversation=conversation, user_message=message, mode="fake"
    )

    limits = turn_limits_admit(client=client, conversation=conversation, trace=trace, mode="fake")

    assert limits.mode == ("adaptive" if capped else "fake")
    assert (limits.capped or {}).get("reason") == ("hourly_cap" if capped else None)


# The plan admin's help and the usage charts --------------------------------------------------


def test_the_plan_admin_s_mode_help_has_the_row_the_mode_declares(fake_mode):
    from apps.clients.admin import AI_MODE_HELP

    fake_mode()
    help_text = str(AI_MODE_HELP)  # built when shown: a mode registered later is in it

    row = (
        "<tr><td><strong>Fake</strong> (fake note)</td><td>Fake happens here.</td>"
        "<td>fake calls</td><td>fake cost</td></tr>"
    )
    assert row in help_text


@pytest.mark.django_db
def test_the_plan_admin_page_shows_the_mode_s_help(fake_mode, admin_client):
    fake_mode()
    plan = PlanFactory()

    page = admin_client.get(reverse("admin:clients_plan_change", args=[plan.pk])).content
    assert "<td>Fake happens here.</td>" in page.decode()


def test_the_usage_chart_draws_a_mode_in_the_colour_it_declares(fake_mode):
    fake_mode(color="#abcdef")
    day = date(2026, 1, 5)

    chart = stacked_cost_chart(
        days=[day], cost_by_day_mode={day: {"fake": Decimal("0.5")}}, title="Cost"
    )

    assert mode_color("fake") == "#abcdef"
    assert mode_colors()["fake"] == "#abcdef"
    assert chart.count('fill="#abcdef"') == 2  # its bar and its legend swatch
