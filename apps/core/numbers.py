"""Reading a number out of data that may hold anything (a tool call's params, a stored report, a
setting typed by staff)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any


def finite_decimal(value: Any) -> Decimal | None:
    """`value` as a finite Decimal, or None when it is not one: a boolean (JSON's `true` is no
    amount), text that is not a number, NaN or an infinity."""
    if isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None
