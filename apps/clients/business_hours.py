"""A client's business hours (`Client.business_hours`, docs/tenant-import.md "Business hours"):
when a person answers a hand-off. Validation and the pure clock arithmetic live here; what a
customer is told at a hand-off is apps/escalations/availability.py.

The document::

    {"time_zone": "America/Denver",                     # an IANA time zone
     "weekly": {"mon": ["08:00-12:00", "13:00-18:00"],  # mon … sun; a day left out is closed
                "sat": ["09:00-14:00"]},
     "holidays": ["2026-12-25"]}                        # closed all day (YYYY-MM-DD)

`{}` = no business hours: a hand-off says nothing about when a person answers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from django.utils.translation import gettext as _

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
KEYS = ("time_zone", "weekly", "holidays")
MAX_INTERVALS_PER_DAY = 6
MAX_HOLIDAYS = 400
# How far ahead the next opening is looked for (a year of holidays and then some).
SEARCH_DAYS = 400
_INTERVAL = re.compile(r"^(\d{2}):(\d{2})\s*-\s*(\d{2}):(\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Hours:
    """Validated business hours: the zone, each weekday's (start, end) minutes since
    midnight (0 = Monday), and the holidays."""

    zone: ZoneInfo
    weekly: tuple[tuple[tuple[int, int], ...], ...]
    holidays: frozenset[date]


def _interval(text: Any) -> tuple[int, int] | str:
    """(start, end) in minutes since midnight, or what is wrong with it."""
    match = _INTERVAL.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        return _("an interval is written HH:MM-HH:MM, e.g. 09:00-17:30")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 23 or m1 > 59 or m2 > 59 or h2 > 24 or (h2 == 24 and m2):
        return _("an interval is written HH:MM-HH:MM, e.g. 09:00-17:30")
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if end <= start:
        return _("an interval ends after it starts (an evening past midnight is two intervals)")
    return start, end


def _day_intervals(day: str, intervals: Any, errors: dict[str, str]) -> list[tuple[int, int]]:
    """The valid intervals of `day`, sorted; what is wrong with them goes into `errors`."""
    if not isinstance(intervals, list) or len(intervals) > MAX_INTERVALS_PER_DAY:
        errors[f"weekly.{day}"] = _("must be a list of at most %(n)d intervals") % {
            "n": MAX_INTERVALS_PER_DAY
        }
        return []
    parsed: list[tuple[int, int]] = []
    for index, text in enumerate(intervals):
        found = _interval(text)
        if isinstance(found, str):
            errors[f"weekly.{day}[{index}]"] = found
        else:
            parsed.append(found)
    parsed.sort()
    if any(a[1] > b[0] for a, b in pairwise(parsed)):
        errors[f"weekly.{day}"] = _("the intervals of one day overlap")
    return parsed


def _weekly_errors(weekly: Any, errors: dict[str, str]) -> None:
    """Add what is wrong with the `weekly` part to `errors`."""
    if not isinstance(weekly, dict):
        errors["weekly"] = _("must be an object")
        return
    for day in sorted(set(weekly) - set(DAYS)):
        errors[f"weekly.{day}"] = _("unknown key (known: %(keys)s)") % {"keys": ", ".join(DAYS)}
    opened = False
    for day in DAYS:
        opened = bool(_day_intervals(day, weekly.get(day, []), errors)) or opened
    if not opened and not any(k.startswith("weekly") for k in errors):
        errors["weekly"] = _("at least one day needs opening hours")


def _holidays_errors(holidays: Any, errors: dict[str, str]) -> None:
    """Add what is wrong with the `holidays` part to `errors`."""
    if not isinstance(holidays, list) or len(holidays) > MAX_HOLIDAYS:
        errors["holidays"] = _("must be a list of at most %(n)d dates") % {"n": MAX_HOLIDAYS}
        return
    for index, text in enumerate(holidays):
        try:
            if not isinstance(text, str) or not _DATE.match(text):
                raise ValueError(text)
            date.fromisoformat(text)
        except ValueError:
            errors[f"holidays[{index}]"] = _("a date is written YYYY-MM-DD, e.g. 2026-12-25")


def business_hours_errors(value: Any) -> dict[str, str]:
    """What is wrong with a business hours document, by path (`weekly.mon[1]`); {} = valid."""
    if value in (None, {}):
        return {}
    if not isinstance(value, dict):
        return {"": _("must be an object")}
    errors: dict[str, str] = {}
    for key in sorted(set(value) - set(KEYS)):
        errors[key] = _("unknown key (known: %(keys)s)") % {"keys": ", ".join(KEYS)}
    zone = value.get("time_zone")
    if not isinstance(zone, str) or zone not in available_timezones():
        errors["time_zone"] = _("not a time zone of the IANA database, e.g. Europe/Berlin")
    _weekly_errors(value.get("weekly"), errors)
    _holidays_errors(value.get("holidays", []), errors)
    return errors


def parse_hours(value: Any) -> Hours | None:
    """The client's hours, or None when it has none (or, defensively, invalid ones: a hand-off
    then says nothing about hours rather than something wrong)."""
    if not value or business_hours_errors(value):
        return None
    weekly = tuple(
        tuple(
            sorted(i for i in map(_interval, value["weekly"].get(day, [])) if isinstance(i, tuple))
        )
        for day in DAYS
    )
    return Hours(
        zone=ZoneInfo(value["time_zone"]),
        weekly=weekly,
        holidays=frozenset(date.fromisoformat(d) for d in value.get("holidays", [])),
    )


def _at(day: date, minutes: int, zone: ZoneInfo) -> datetime:
    """The instant of `minutes` past midnight of `day`, a wall-clock time in `zone`."""
    if minutes >= 24 * 60:
        return datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)
    return datetime.combine(day, time(minutes // 60, minutes % 60), tzinfo=zone)


def is_open(hours: Hours, now: datetime) -> bool:
    """Whether a person is at work at `now` (an aware datetime)."""
    local = now.astimezone(hours.zone)
    day = local.date()
    if day in hours.holidays:
        return False
    return any(
        _at(day, start, hours.zone) <= now < _at(day, end, hours.zone)
        for start, end in hours.weekly[day.weekday()]
    )


def next_opening(hours: Hours, now: datetime) -> datetime | None:
    """The next instant after `now` at which the team is at work (in the client's zone), or
    None when none is found within SEARCH_DAYS (every day a holiday)."""
    today = now.astimezone(hours.zone).date()
    for offset in range(SEARCH_DAYS):
        day = today + timedelta(days=offset)
        if day in hours.holidays:
            continue
        for start, _end in hours.weekly[day.weekday()]:
            opening = _at(day, start, hours.zone)
            if opening > now:
                return opening
    return None
