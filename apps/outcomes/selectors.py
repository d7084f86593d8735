"""Outcome metrics of a client's conversations for a period (docs/outcomes.md defines each one
and its formula; keep the two in step).

A conversation belongs to the day it started (server time zone). Everything is computed from
five flat, client-scoped queries — conversations with their message timestamps, escalations,
ratings, usage records and the same customers' later conversations — then folded in Python,
so the query count does not grow with the number of conversations or days.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Max, Min, Q, QuerySet, Sum
from django.utils import timezone

from apps.billing.models import UsageRecord
from apps.billing.periods import day_start
from apps.clients.models import Client
from apps.conversations.models import (
    Conversation,
    ConversationRating,
    ConversationStatus,
    Role,
    Visibility,
)
from apps.escalations.models import Escalation, EscalationReason

GROUP_BYS = ("total", "day")
POSITIVE_SCORE = 4  # 4 and 5 are positive (CSAT); 1 and 2 negative; 3 neutral
NEGATIVE_SCORE = 2
MONEY_PLACES = Decimal("0.00000001")


@dataclass
class ConversationFacts:
    """What the metrics need to know about one conversation."""

    pk: int
    day: date
    status: str
    first_customer_at: datetime
    first_reply_at: datetime | None
    last_assistant_at: datetime | None
    last_activity_at: datetime
    visitor_id: str
    contact_email: str
    handoff_reason: str = ""
    score: int | None = None
    came_back: bool = False
    cost_usd: Decimal = Decimal("0")
    billed_usd: Decimal = Decimal("0")
    public_id: str = ""

    def ended(self, *, now: datetime, window: timedelta) -> bool:
        return (
            self.status == ConversationStatus.CLOSED
            or self.score is not None
            or self.last_activity_at <= now - window
        )

    @property
    def handed_off(self) -> bool:
        return bool(self.handoff_reason)

    def resolved_by_assistant(self, *, now: datetime, window: timedelta) -> bool:
        if not self.ended(now=now, window=window) or self.handed_off:
            return False
        if self.last_assistant_at is None:  # the assistant never answered
            return False
        if self.score is not None and self.score >= POSITIVE_SCORE:
            return True
        if self.score is not None and self.score <= NEGATIVE_SCORE:
            return False
        return not self.came_back


@dataclass
class OutcomeFigures:
    conversations: int = 0
    ended: int = 0
    resolved: int = 0
    handed_off: int = 0
    handoff_reasons: dict[str, int] = field(default_factory=dict)
    first_response_median_seconds: float | None = None
    first_response_p90_seconds: float | None = None
    resolution_median_seconds: float | None = None
    resolution_p90_seconds: float | None = None
    cost_usd: Decimal = Decimal("0")
    billed_usd: Decimal = Decimal("0")
    ratings: int = 0
    positive_ratings: int = 0
    rating_average: float | None = None

    @property
    def resolution_rate(self) -> float | None:
        return _ratio(self.resolved, self.ended)

    @property
    def handoff_rate(self) -> float | None:
        return _ratio(self.handed_off, self.conversations)

    @property
    def csat(self) -> float | None:
        return _ratio(self.positive_ratings, self.ratings)

    @property
    def cost_per_resolved_usd(self) -> Decimal | None:
        return _per(self.cost_usd, self.resolved)

    @property
    def billed_per_resolved_usd(self) -> Decimal | None:
        return _per(self.billed_usd, self.resolved)


@dataclass
class OutcomeReport:
    client: Client
    start: date
    end: date
    group_by: str
    window_hours: int
    totals: OutcomeFigures
    groups: list[tuple[str, OutcomeFigures]]


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _per(amount: Decimal, count: int) -> Decimal | None:
    return (amount / count).quantize(MONEY_PLACES) if count else None


def percentile(values: list[float], share: float) -> float | None:
    """Nearest-rank percentile (`share` 0.5 = median, 0.9 = p90); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return round(ordered[rank - 1], 1)


def resolution_window(client: Client) -> timedelta:
    return timedelta(hours=int(client.plan.resolution_window_hours or 24))


def _conversation_rows(
    *, client: Client, since: datetime, until: datetime
) -> Iterable[Mapping[str, Any]]:
    """The conversations started in [since, until) in which the customer wrote, with the times
    of their first customer message, first reply, last answer and last visible message."""
    return _rows_of(
        Conversation.objects.for_client(client).filter(created_at__gte=since, created_at__lt=until)
    )


def _rows_of(conversations: QuerySet[Conversation]) -> Iterable[Mapping[str, Any]]:
    """`conversations` in which the customer wrote, with what `_facts_of` reads."""
    return (
        conversations.annotate(
            first_customer_at=Min("messages__created_at", filter=Q(messages__role=Role.USER)),
            first_reply_at=Min(
                "messages__created_at",
                filter=Q(
                    messages__role__in=[Role.ASSISTANT, Role.STAFF],
                    messages__visibility=Visibility.VISIBLE,
                ),
            ),
            last_assistant_at=Max(
                "messages__created_at",
                filter=Q(messages__role=Role.ASSISTANT, messages__visibility=Visibility.VISIBLE),
            ),
            last_visible_at=Max(
                "messages__created_at", filter=Q(messages__visibility=Visibility.VISIBLE)
            ),
        )
        .filter(first_customer_at__isnull=False)
        .values(
            "pk",
            "public_id",
            "created_at",
            "status",
            "visitor_id",
            "contact_email",
            "first_customer_at",
            "first_reply_at",
            "last_assistant_at",
            "last_visible_at",
        )
    )


def _facts_of(row: Mapping[str, Any]) -> ConversationFacts:
    first_reply = row["first_reply_at"]
    return ConversationFacts(
        pk=row["pk"],
        day=timezone.localtime(row["created_at"]).date(),
        status=row["status"],
        first_customer_at=row["first_customer_at"],
        # A staff line written before the customer's first message is no response to it.
        first_reply_at=first_reply
        if first_reply and first_reply >= row["first_customer_at"]
        else None,
        last_assistant_at=row["last_assistant_at"],
        last_activity_at=row["last_visible_at"] or row["created_at"],
        visitor_id=row["visitor_id"],
        contact_email=row["contact_email"].lower(),
        public_id=str(row["public_id"]),
    )


def _mark_handoffs_and_scores(
    *, client: Client, facts: dict[int, ConversationFacts], in_period: Q
) -> None:
    """Each conversation's hand-off reason (its first escalation's) and rating score."""
    for conversation_id, reason in (
        Escalation.objects.for_client(client)
        .filter(in_period)
        .order_by("conversation_id", "created_at", "pk")
        .values_list("conversation_id", "reason")
    ):
        fact = facts.get(conversation_id)
        if fact is not None and not fact.handoff_reason:
            fact.handoff_reason = reason
    for conversation_id, score in (
        ConversationRating.objects.for_client(client)
        .filter(in_period)
        .values_list("conversation_id", "score")
    ):
        if conversation_id in facts:
            facts[conversation_id].score = score


def _mark_costs(*, client: Client, facts: dict[int, ConversationFacts], in_period: Q) -> None:
    """Each conversation's cost and billed amount (its usage records')."""
    for usage in (
        UsageRecord.objects.for_client(client)
        .filter(in_period)
        .values("conversation_id")
        .annotate(cost=Sum("cost_usd"), billed=Sum("billed_usd"))
    ):
        fact = facts.get(usage["conversation_id"])
        if fact is not None:
            fact.cost_usd = usage["cost"] or Decimal("0")
            fact.billed_usd = usage["billed"] or Decimal("0")


def conversation_facts(
    *, client: Client, start: date, end: date, now: datetime | None = None
) -> list[ConversationFacts]:
    """Every conversation started on the days `start` … `end` (included) in which the customer
    wrote at least once, with what the metrics need."""
    now = now or timezone.now()
    window = resolution_window(client)
    since, until = day_start(start), day_start(end + timedelta(days=1))
    facts = {
        row["pk"]: _facts_of(row)
        for row in _conversation_rows(client=client, since=since, until=until)
    }
    if not facts:
        return []
    in_period = Q(conversation__created_at__gte=since, conversation__created_at__lt=until)
    _mark_handoffs_and_scores(client=client, facts=facts, in_period=in_period)
    _mark_costs(client=client, facts=facts, in_period=in_period)
    _mark_returns(client=client, facts=list(facts.values()), until=until + window, window=window)
    return list(facts.values())


def ended_conversation_facts(
    *, client: Client, now: datetime, lookback: timedelta
) -> list[ConversationFacts]:
    """The client's conversations not judged yet (no `ConversationResolution`) that have
    ended by `now` — rated, closed, or quiet for the resolution window — with activity in the
    `lookback` before that; with what `resolved_by_assistant` needs."""
    window = resolution_window(client)
    quiet_since = now - window
    candidates = (
        Conversation.objects.for_client(client)
        .filter(last_message_at__gt=quiet_since - lookback, resolution__isnull=True)
        .filter(
            Q(last_message_at__lte=quiet_since)
            | Q(rating__isnull=False)
            | Q(status=ConversationStatus.CLOSED)
        )
    )
    facts = {row["pk"]: _facts_of(row) for row in _rows_of(candidates)}
    if not facts:
        return []
    chosen = Q(conversation_id__in=list(facts))
    _mark_handoffs_and_scores(client=client, facts=facts, in_period=chosen)
    _mark_returns(client=client, facts=list(facts.values()), until=now, window=window)
    return [fact for fact in facts.values() if fact.ended(now=now, window=window)]


def _mark_returns(
    *, client: Client, facts: list[ConversationFacts], until: datetime, window: timedelta
) -> None:
    """A customer came back when the same visitor id, or the same e-mail address, started
    another conversation within `window` after this one's last visible message."""
    visitors = {f.visitor_id for f in facts if f.visitor_id}
    emails = {f.contact_email for f in facts if f.contact_email}
    if not visitors and not emails:
        return
    earliest = min(f.first_customer_at for f in facts)
    later = (
        Conversation.objects.for_client(client)
        .filter(created_at__gt=earliest, created_at__lt=until)
        .filter(Q(visitor_id__in=visitors) | Q(contact_email__in=emails))
        .values_list("pk", "visitor_id", "contact_email", "created_at")
    )
    starts: dict[tuple[str, str], list[tuple[int, datetime]]] = defaultdict(list)
    for pk, visitor_id, email, created_at in later:
        if visitor_id:
            starts[("v", visitor_id)].append((pk, created_at))
        if email:
            starts[("e", email.lower())].append((pk, created_at))
    for fact in facts:
        keys = [("v", fact.visitor_id)] if fact.visitor_id else []
        keys += [("e", fact.contact_email)] if fact.contact_email else []
        fact.came_back = any(
            pk != fact.pk and fact.last_activity_at < created <= fact.last_activity_at + window
            for key in keys
            for pk, created in starts.get(key, [])
        )


def figures_of(
    facts: Iterable[ConversationFacts], *, now: datetime, window: timedelta
) -> OutcomeFigures:
    figures = OutcomeFigures()
    reasons: Counter[str] = Counter()
    first_responses: list[float] = []
    resolutions: list[float] = []
    scores: list[int] = []
    for fact in facts:
        figures.conversations += 1
        figures.ended += fact.ended(now=now, window=window)
        if fact.handed_off:
            figures.handed_off += 1
            reasons[fact.handoff_reason] += 1
        if fact.first_reply_at is not None:
            first_responses.append((fact.first_reply_at - fact.first_customer_at).total_seconds())
        if fact.resolved_by_assistant(now=now, window=window):
            figures.resolved += 1
            assert fact.last_assistant_at is not None  # resolved ⇒ the assistant answered
            resolutions.append((fact.last_assistant_at - fact.first_customer_at).total_seconds())
        if fact.score is not None:
            scores.append(fact.score)
        figures.cost_usd += fact.cost_usd
        figures.billed_usd += fact.billed_usd
    figures.handoff_reasons = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    figures.first_response_median_seconds = percentile(first_responses, 0.5)
    figures.first_response_p90_seconds = percentile(first_responses, 0.9)
    figures.resolution_median_seconds = percentile(resolutions, 0.5)
    figures.resolution_p90_seconds = percentile(resolutions, 0.9)
    figures.ratings = len(scores)
    figures.positive_ratings = sum(1 for s in scores if s >= POSITIVE_SCORE)
    figures.rating_average = round(sum(scores) / len(scores), 2) if scores else None
    figures.cost_usd = figures.cost_usd.quantize(MONEY_PLACES)
    figures.billed_usd = figures.billed_usd.quantize(MONEY_PLACES)
    return figures


def outcome_report(
    *,
    client: Client,
    start: date,
    end: date,
    group_by: str = "total",
    now: datetime | None = None,
) -> OutcomeReport:
    """The outcome figures of the conversations started on `start` … `end`, in total and (with
    `group_by="day"`) per day; days without conversations are left out."""
    if group_by not in GROUP_BYS:
        raise ValueError(f"group_by must be one of {GROUP_BYS}")
    now = now or timezone.now()
    window = resolution_window(client)
    facts = conversation_facts(client=client, start=start, end=end, now=now)
    groups: list[tuple[str, OutcomeFigures]] = []
    if group_by == "day":
        by_day: dict[date, list[ConversationFacts]] = defaultdict(list)
        for fact in facts:
            by_day[fact.day].append(fact)
        groups = [
            (day.isoformat(), figures_of(by_day[day], now=now, window=window))
            for day in sorted(by_day)
        ]
    return OutcomeReport(
        client=client,
        start=start,
        end=end,
        group_by=group_by,
        window_hours=int(window.total_seconds() // 3600),
        totals=figures_of(facts, now=now, window=window),
        groups=groups,
    )


HANDOFF_REASON_LABELS: dict[str, Any] = dict(EscalationReason.choices)


def handoff_reason_rows(figures: OutcomeFigures) -> list[tuple[Any, int]]:
    """The hand-offs by reason, most first, each reason by its label (a report page's table)."""
    return [
        (HANDOFF_REASON_LABELS.get(reason, reason), count)
        for reason, count in figures.handoff_reasons.items()
    ]
