"""What a hand-off tells the customer about when a person answers, from the client's business
hours (apps/clients/business_hours.py; docs/tenant-import.md "Business hours"):

- no hours configured: nothing (the hand-off text as it always was);
- outside the hours: when the team is back — the next opening, in the customer's language with
  that language's date and time formats, in the client's time zone — and, unless the customer
  already left one, a request for an e-mail address (the widget's e-mail form, shown with every
  hand-off);
- inside the hours: the team's typical wait, the median first-response time of the client's
  own hand-offs of the last 7 days that began inside the hours — only when there are at least
  MIN_SAMPLES of them; with fewer, nothing is said about the wait rather than a guess."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from babel import Locale, UnknownLocaleError
from babel.dates import format_date, format_time, format_timedelta, get_timezone_name
from django.conf import settings
from django.db.models import Min, OuterRef, Subquery
from django.utils import timezone, translation
from django.utils.translation import gettext

from apps.clients.business_hours import Hours, is_open, next_opening, parse_hours
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role, Visibility
from apps.escalations.models import Escalation, EscalationReason

WAIT_WINDOW = timedelta(days=7)
MIN_SAMPLES = 5
MAX_SAMPLES = 2000  # the most recent hand-offs of the window (a busy client's week is plenty)


@dataclass(frozen=True)
class Availability:
    """When a person answers: `open` now or not; `next_open` (outside the hours); `wait`
    (inside, when known)."""

    open: bool
    next_open: datetime | None = None
    wait: timedelta | None = None

    def data(self) -> dict[str, Any]:
        """For the hand-off message's `data` (the API shows it)."""
        return {
            "open": self.open,
            "next_open": self.next_open.isoformat() if self.next_open else None,
            "wait_seconds": int(self.wait.total_seconds()) if self.wait else None,
        }


def first_response_median(
    *, client: Client, now: datetime, hours: Hours | None = None
) -> timedelta | None:
    """The median time from a hand-off to the first staff reply the customer saw, over the
    client's hand-offs of the last 7 days (begun inside `hours` when given; staff take-overs,
    which start with the reply, left out); None with fewer than MIN_SAMPLES answered ones."""
    first_reply = (
        Message.objects.for_client(client)
        .filter(
            conversation=OuterRef("conversation"),
            role=Role.STAFF,
            visibility=Visibility.VISIBLE,
            created_at__gte=OuterRef("created_at"),
        )
        .values("conversation")
        .annotate(first=Min("created_at"))
        .values("first")
    )
    rows = (
        Escalation.objects.for_client(client)
        .filter(created_at__gte=now - WAIT_WINDOW, created_at__lte=now)
        .exclude(reason=EscalationReason.STAFF_TAKEOVER)
        .annotate(first_reply=Subquery(first_reply))
        .filter(first_reply__isnull=False)
        .order_by("-created_at")
        .values_list("created_at", "first_reply")[:MAX_SAMPLES]
    )
    waits = [
        (replied - created).total_seconds()
        for created, replied in rows
        if hours is None or is_open(hours, created)
    ]
    if len(waits) < MIN_SAMPLES:
        return None
    return timedelta(seconds=statistics.median(waits))


def handoff_availability(*, client: Client, now: datetime | None = None) -> Availability | None:
    """When a person answers a hand-off made `now`; None when the client has no hours."""
    hours = parse_hours(client.business_hours)
    if hours is None:
        return None
    now = now or timezone.now()
    if is_open(hours, now):
        return Availability(
            open=True, wait=first_response_median(client=client, now=now, hours=hours)
        )
    return Availability(open=False, next_open=next_opening(hours, now))


def _locale(language: str) -> str:
    """Babel's locale for a language code; the default language's for one it does not know."""
    for code in (language, settings.LANGUAGE_CODE, "en"):
        try:
            return str(Locale.parse((code or "").replace("-", "_")))
        except (ValueError, TypeError, UnknownLocaleError):
            continue
    return "en"


def availability_text(*, availability: Availability, conversation: Conversation) -> str:
    """The sentences added to the hand-off message, in the conversation's language ('' when
    there is nothing to say)."""
    language = conversation.language or settings.LANGUAGE_CODE
    locale = _locale(language)
    parts: list[str] = []
    with translation.override(language):
        if availability.open and availability.wait is not None:
            minutes = max(1, math.ceil(availability.wait.total_seconds() / 60))
            wait = format_timedelta(
                timedelta(minutes=minutes), threshold=2, add_direction=False, locale=locale
            )
            parts.append(
                gettext("Right now a person usually answers within %(wait)s.") % {"wait": wait}
            )
        elif not availability.open:
            local = availability.next_open  # a wall-clock time in the client's zone
            if local is not None:
                parts.append(
                    gettext(
                        "Our team is away right now and will answer from %(day)s at %(time)s "
                        "(%(zone)s)."
                    )
                    % {
                        "day": format_date(local, format="full", locale=locale),
                        "time": format_time(local, format="short", locale=locale),
                        "zone": get_timezone_name(local, locale=locale),
                    }
                )
            if not conversation.contact_email:
                parts.append(
                    gettext(
                        "Leave your e-mail address in this chat's e-mail field and we'll also "
                        "send their reply there."
                    )
                )
    return " ".join(parts)
