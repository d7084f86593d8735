"""The outcome formulas (docs/outcomes.md) on hand-made conversations: each expected figure is
worked out by hand from the conversations the test builds."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest

from apps.conversations.models import ConversationStatus, Role
from apps.escalations.models import EscalationReason
from apps.outcomes.selectors import outcome_report, percentile
from tests.outcomes.conftest import DAY, NOW, at, make_conversation

pytestmark = pytest.mark.django_db

PERIOD = {"start": date(2026, 3, 10), "end": date(2026, 3, 10)}


def test_resolution_handoffs_returns_and_ratings(client_a, client_b):
    plain = make_conversation(client_a, cost="0.01", billed="0.03")
    make_conversation(
        client_a, handoff=EscalationReason.CUSTOMER_REQUEST, cost="0.02", billed="0.06"
    )
    make_conversation(client_a, handoff=EscalationReason.TOOL_FAILURE)
    make_conversation(client_a, handoff=EscalationReason.CUSTOMER_REQUEST)
    # v1 comes back 2 h after its first conversation ended: the first is not resolved; the
    # second (no later return) is.
    make_conversation(client_a, visitor_id="v1")
    make_conversation(client_a, visitor_id="v1", started=at(hours=2))
    # v2 comes back after 30 h — outside the 24 h window: still resolved.
    make_conversation(client_a, visitor_id="v2")
    make_conversation(client_a, visitor_id="v2", started=at(hours=30))  # next day: not counted
    # The same address coming back counts like the same visitor id.
    make_conversation(client_a, contact_email="Ana@Example.com")
    make_conversation(client_a, contact_email="ana@example.com", started=at(hours=3))
    # Came back, but rated it 5: resolved. Rated 2 with no return: not resolved.
    make_conversation(client_a, visitor_id="v3", score=5)
    make_conversation(client_a, visitor_id="v3", started=at(hours=1))
    make_conversation(client_a, score=2)
    # The customer wrote and nobody answered: ended, never resolved by the assistant.
    make_conversation(client_a, lines=[(Role.USER, 0)])
    # No customer message at all (a widget opened and left): not a conversation to count.
    make_conversation(client_a, lines=[])
    # Another client's conversations never count.
    make_conversation(client_b, score=1, cost="5")

    report = outcome_report(client=client_a, **PERIOD, now=NOW)
    totals = report.totals
    assert plain.pk  # (built)
    assert totals.conversations == 13
    assert totals.ended == 13  # all idle for more than 24 h at NOW
    # resolved: plain, v1's second, v2's first, ana's second, v3 rated 5, v3's second = 6
    assert totals.resolved == 6
    assert totals.resolution_rate == round(6 / 13, 4)
    assert totals.handed_off == 3
    assert totals.handoff_rate == round(3 / 13, 4)
    assert totals.handoff_reasons == {"customer_request": 2, "tool_failure": 1}
    assert totals.ratings == 2
    assert totals.positive_ratings == 1
    assert totals.csat == 0.5
    assert totals.rating_average == 3.5
    assert totals.cost_usd == Decimal("0.03")
    assert totals.billed_usd == Decimal("0.09")
    assert totals.cost_per_resolved_usd == Decimal("0.005")
    assert totals.billed_per_resolved_usd == Decimal("0.015")
    # Every answered conversation was answered after 30 s; resolved ones took 30 s in all.
    assert totals.first_response_median_seconds == 30.0
    assert totals.resolution_p90_seconds == 30.0


def test_a_conversation_still_active_has_not_ended(client_a):
    make_conversation(client_a)  # last message at DAY + 30 s
    make_conversation(client_a, status=ConversationStatus.CLOSED)
    make_conversation(client_a, score=4)

    soon = DAY + timedelta(minutes=90)  # inside the 24 h window
    totals = outcome_report(client=client_a, **PERIOD, now=soon).totals
    # The quiet one has not ended yet; the closed and the rated one have (and are resolved).
    assert (totals.conversations, totals.ended, totals.resolved) == (3, 2, 2)
    assert totals.resolution_rate == 1.0

    client_a.plan.resolution_window_hours = 1
    client_a.plan.save()
    totals = outcome_report(client=client_a, **PERIOD, now=soon).totals
    assert (totals.ended, totals.resolved) == (3, 3)


def test_times_are_median_and_p90_per_conversation(client_a):
    for seconds in (10, 20, 30, 40, 600):
        make_conversation(client_a, lines=[(Role.USER, 0), (Role.ASSISTANT, seconds)])
    # A staff reply after a hand-off is the first response too; the conversation is no
    # resolution of the assistant's.
    make_conversation(
        client_a,
        lines=[(Role.USER, 0), (Role.STAFF, 300)],
        handoff=EscalationReason.STAFF_TAKEOVER,
    )
    # The assistant answers at 5 s, the customer asks again and gets an answer at 900 s: its
    # resolution time is 900 s.
    make_conversation(
        client_a,
        lines=[(Role.USER, 0), (Role.ASSISTANT, 5), (Role.USER, 60), (Role.ASSISTANT, 900)],
    )
    totals = outcome_report(client=client_a, **PERIOD, now=NOW).totals
    # first responses: 5 10 20 30 40 300 600 → median 30, p90 (rank 7) 600
    assert totals.first_response_median_seconds == 30.0
    assert totals.first_response_p90_seconds == 600.0
    # resolutions: 10 20 30 40 600 900 → median (rank 3) 30, p90 (rank 6) 900
    assert totals.resolution_median_seconds == 30.0
    assert totals.resolution_p90_seconds == 900.0


def test_group_by_day_splits_by_the_day_a_conversation_started(client_a):
    make_conversation(client_a, score=5)
    make_conversation(client_a, started=at(days=1), handoff=EscalationReason.POLICY)
    make_conversation(client_a, started=at(days=1))
    report = outcome_report(
        client=client_a, start=date(2026, 3, 9), end=date(2026, 3, 11), group_by="day", now=NOW
    )
    assert [key for key, _ in report.groups] == ["2026-03-10", "2026-03-11"]
    first, second = (figures for _, figures in report.groups)
    assert (first.conversations, first.resolved, first.csat) == (1, 1, 1.0)
    assert (second.conversations, second.resolved, second.handed_off) == (2, 1, 1)
    assert report.totals.conversations == 3


def test_empty_period_has_no_rates(client_a):
    totals = outcome_report(client=client_a, **PERIOD, now=NOW).totals
    assert totals.conversations == 0
    assert totals.resolution_rate is None
    assert totals.csat is None
    assert totals.cost_per_resolved_usd is None
    assert totals.first_response_median_seconds is None


def test_the_figures_take_a_fixed_number_of_queries(client_a, django_assert_max_num_queries):
    for n in range(12):
        make_conversation(client_a, visitor_id=f"v{n % 3}", score=(n % 5) + 1, cost="0.001")
    with django_assert_max_num_queries(7):
        outcome_report(client=client_a, **PERIOD, group_by="day", now=NOW)


@pytest.mark.parametrize(
    ("values", "share", "expected"),
    [([], 0.5, None), ([7.0], 0.9, 7.0), ([1, 2, 3, 4], 0.5, 2), ([1, 2, 3, 4], 0.9, 4)],
)
def test_percentile_is_nearest_rank(values, share, expected):
    assert percentile(values, share) == expected
