"""A hand-off says when a person answers, from the client's business hours: outside them, the
next opening (in the customer's language and formats, in the client's zone) and a request for
an e-mail address; inside them, the median first-response time of the client's own hand-offs
of the last 7 days — nothing when there are too few; no hours: the hand-off as before."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from apps.clients.business_hours import is_open, next_opening, parse_hours
from apps.clients.models import Client
from apps.conversations.models import Conversation, Kind, Message
from apps.conversations.services import conversation_create
from apps.escalations.availability import MIN_SAMPLES, first_response_median
from apps.escalations.models import Escalation, EscalationReason
from apps.escalations.services import (
    HANDOFF_TEXT,
    conversation_takeover,
    escalation_create,
    staff_reply,
)

pytestmark = pytest.mark.django_db

TOKYO = ZoneInfo("Asia/Tokyo")  # no daylight saving time: the expected opening is exact
ALWAYS_OPEN = {
    "time_zone": "Asia/Tokyo",
    "weekly": {d: ["00:00-24:00"] for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")},
}
SPANISH_DAYS = ["lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"]
SPANISH_MONTHS = [
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
]


def closed_for_two_days() -> tuple[dict, datetime]:
    """Hours that are closed now (today and tomorrow are holidays in Tokyo), and the opening
    that follows: the day after tomorrow at 09:30, Tokyo time."""
    today = timezone.now().astimezone(TOKYO).date()
    hours = {
        "time_zone": "Asia/Tokyo",
        "weekly": {d: ["09:30-17:00"] for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")},
        "holidays": [str(today), str(today + timedelta(days=1))],
    }
    opening = datetime.combine(today + timedelta(days=2), datetime.min.time(), tzinfo=TOKYO)
    return hours, opening.replace(hour=9, minute=30)


def hand_off(client: Client, *, language: str = "en", email: str = "") -> Message:
    conversation = conversation_create(client=client, language=language)[0]
    if email:
        Conversation.objects.for_client(client).filter(pk=conversation.pk).update(
            contact_email=email
        )
        conversation.refresh_from_db()
    escalation_create(
        client=client, conversation=conversation, reason=EscalationReason.CUSTOMER_REQUEST
    )
    return Message.objects.get(conversation=conversation, kind=Kind.HANDOFF)


def answered_handoff(client: Client, *, wait: timedelta, ago: timedelta) -> None:
    """A hand-off made `ago`, whose first staff reply came `wait` later."""
    conversation = conversation_create(client=client)[0]
    escalation = escalation_create(
        client=client,
        conversation=conversation,
        reason=EscalationReason.CUSTOMER_REQUEST,
        notify=False,
    )
    reply = staff_reply(client=client, conversation=conversation, text="Hello, I'm here.")
    started = timezone.now() - ago
    Escalation.objects.for_client(client).filter(pk=escalation.pk).update(created_at=started)
    Message.objects.for_client(client).filter(pk=reply.pk).update(created_at=started + wait)


def test_without_business_hours_the_handoff_is_as_before(client_a):
    message = hand_off(client_a)
    assert message.text == HANDOFF_TEXT
    assert "availability" not in message.data


def test_outside_the_hours_it_says_when_in_spanish_and_asks_for_an_email(client_a):
    client_a.business_hours, opening = closed_for_two_days()
    client_a.save()

    message = hand_off(client_a, language="es")

    text = message.text
    assert text.startswith("He pasado")  # the hand-off itself, in Spanish
    assert SPANISH_DAYS[opening.weekday()] in text
    assert f"{opening.day} de {SPANISH_MONTHS[opening.month - 1]}" in text
    assert "9:30" in text
    assert "hora estándar de Japón" in text  # the client's zone, named in Spanish
    assert "correo electrónico" in text  # asks for an e-mail address
    assert "minutos" not in text
    assert message.data["availability"] == {
        "open": False,
        "next_open": opening.isoformat(),
        "wait_seconds": None,
    }


def test_a_customer_who_left_an_email_is_not_asked_again(client_a):
    client_a.business_hours, _opening = closed_for_two_days()
    client_a.save()
    text = hand_off(client_a, email="ana@example.com").text
    assert "9:30" in text
    assert "e-mail field" not in text


def test_a_language_the_formats_do_not_know_gets_the_default_ones(client_a):
    client_a.business_hours, opening = closed_for_two_days()
    client_a.save()
    message = hand_off(client_a, language="zz")  # e.g. an old conversation's stray code
    assert message.text.startswith(HANDOFF_TEXT)
    assert f"{opening.day}, {opening.year} at 9:30" in message.text


def test_inside_the_hours_it_gives_the_median_wait_of_the_last_7_days(client_a):
    client_a.business_hours = ALWAYS_OPEN
    client_a.save()
    for minutes in (2, 4, 6, 8, 60):
        answered_handoff(client_a, wait=timedelta(minutes=minutes), ago=timedelta(days=2))
    answered_handoff(client_a, wait=timedelta(hours=20), ago=timedelta(days=8))  # too old

    message = hand_off(client_a)

    assert message.text.startswith(HANDOFF_TEXT)
    assert "Right now a person usually answers within 6 minutes." in message.text
    assert message.data["availability"] == {"open": True, "next_open": None, "wait_seconds": 360}
    assert "e-mail" not in message.text


def test_with_too_few_answered_handoffs_nothing_is_said_about_the_wait(client_a, client_b):
    client_a.business_hours = ALWAYS_OPEN
    client_a.save()
    for minutes in range(1, MIN_SAMPLES):  # one too few
        answered_handoff(client_a, wait=timedelta(minutes=minutes), ago=timedelta(hours=3))
    for _ in range(MIN_SAMPLES):  # another tenant's waits never count
        answered_handoff(client_b, wait=timedelta(minutes=1), ago=timedelta(hours=3))
    # an unanswered hand-off and a staff take-over are no waits either
    hand_off(client_a)
    conversation_takeover(client=client_a, conversation=conversation_create(client=client_a)[0])

    message = hand_off(client_a)
    assert message.text == HANDOFF_TEXT
    assert message.data["availability"]["wait_seconds"] is None
    assert first_response_median(client=client_b, now=timezone.now()) == timedelta(minutes=1)


def test_a_staff_takeover_says_nothing_about_hours(client_a):
    client_a.business_hours, _opening = closed_for_two_days()
    client_a.save()
    conversation = conversation_create(client=client_a)[0]
    conversation_takeover(client=client_a, conversation=conversation)
    message = Message.objects.get(conversation=conversation, kind=Kind.HANDOFF)
    assert "9:30" not in message.text
    assert "availability" not in message.data


def test_waits_of_handoffs_begun_outside_the_hours_do_not_count(client_a):
    """A hand-off on a holiday waits for the next opening: that is no typical wait."""
    today = timezone.now().astimezone(TOKYO).date()
    holiday = today - timedelta(days=1)
    client_a.business_hours = ALWAYS_OPEN | {"holidays": [str(holiday)]}
    client_a.save()
    noon = datetime.combine(holiday, datetime.min.time(), tzinfo=TOKYO).replace(hour=12)
    now = timezone.now()
    for _ in range(MIN_SAMPLES):
        answered_handoff(client_a, wait=timedelta(hours=10), ago=now - noon)  # on the holiday
        answered_handoff(client_a, wait=timedelta(minutes=3), ago=now - noon + timedelta(days=1))

    assert "within 3 minutes." in hand_off(client_a).text
    assert first_response_median(client=client_a, now=timezone.now()) == timedelta(
        minutes=(3 + 600) / 2
    )  # without the hours, every hand-off counts


# -- the clock arithmetic ---------------------------------------------------------------------

DENVER = {
    "time_zone": "America/Denver",
    "weekly": {
        "mon": ["08:00-12:00", "13:00-18:00"],
        "fri": ["08:00-18:00"],
        "sat": ["09:00-14:00"],
    },
    "holidays": ["2026-11-30"],
}


@pytest.mark.parametrize(
    ("now", "opening"),
    [
        # Saturday 23:00 in Denver → Monday is a holiday → Friday 08:00
        ("2026-11-29T06:00:00+00:00", "2026-12-04T08:00:00-07:00"),
        # Friday 10:00 (open) → the next opening is Saturday's
        ("2026-12-04T17:00:00+00:00", "2026-12-05T09:00:00-07:00"),
        # Monday 12:30, the lunch break → 13:00 the same day
        ("2026-12-07T19:30:00+00:00", "2026-12-07T13:00:00-07:00"),
        # Saturday 14:00 sharp: just closed → Monday 08:00
        ("2026-12-05T21:00:00+00:00", "2026-12-07T08:00:00-07:00"),
        # across the switch to daylight saving time (8 March 2026): 08:00 is then UTC-6
        ("2026-03-07T22:00:00+00:00", "2026-03-09T08:00:00-06:00"),
    ],
)
def test_the_next_opening_in_the_clients_zone(now, opening):
    hours = parse_hours(DENVER)
    assert hours is not None
    assert next_opening(hours, datetime.fromisoformat(now)) == datetime.fromisoformat(opening)


def test_open_and_closed_at_the_edges_of_an_interval():
    hours = parse_hours(DENVER)
    assert hours is not None
    friday_8 = datetime(2026, 12, 4, 8, 0, tzinfo=ZoneInfo("America/Denver"))
    assert is_open(hours, friday_8)
    assert not is_open(hours, friday_8 - timedelta(seconds=1))
    assert not is_open(hours, friday_8.replace(hour=18))
    assert not is_open(hours, datetime(2026, 11, 30, 9, 0, tzinfo=ZoneInfo("America/Denver")))
    late = parse_hours({"time_zone": "UTC", "weekly": {"sun": ["20:00-24:00"]}})
    assert late is not None
    assert is_open(late, datetime(2026, 11, 29, 23, 59, tzinfo=ZoneInfo("UTC")))
