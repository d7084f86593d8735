"""What the settings forms of one row (an e-mail channel, an MCP server) share: the columns'
defaults, the values applied over the saved ones with write-only secrets, and one error that
names every bad field. The admin form, the API and the tenant import all check a row's settings
through the app's `*_clean`, which is built on these."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from django.db.models import Model

from apps.core.exceptions import ApplicationError


def column_defaults(model: type[Model], fields: Iterable[str]) -> dict[str, Any]:
    """Each of `fields`' default, as a new row of `model` would have it."""
    return {
        name: model._meta.get_field(name).get_default()  # type: ignore[union-attr]
        for name in fields
    }


def settings_applied(
    model: type[Model],
    fields: Collection[str],
    *,
    saved: Model | None,
    values: Mapping[str, Any],
    secrets: Collection[str],
) -> dict[str, Any]:
    """The row's `fields` once `values` are applied to `saved` (or to a new row's defaults).
    Values of other names are ignored. Secrets are write-only: an empty or absent one keeps the
    saved one."""
    data = (
        {name: getattr(saved, name) for name in fields}
        if saved is not None
        else column_defaults(model, fields)
    )
    data.update(
        (name, value)
        for name, value in values.items()
        if name in fields and (value or name not in secrets)
    )
    return data


def raise_field_problems(problems: Iterable[tuple[str, str]]) -> None:
    """Raise one ApplicationError for every (field, message) in `problems`, its message the
    first one (`{"fields": {field: [message, …]}}`); nothing when there are none."""
    errors: dict[str, list[str]] = {}
    for name, message in problems:
        errors.setdefault(name, []).append(message)
    if errors:
        first, messages = next(iter(errors.items()))
        raise ApplicationError(f"{first}: {messages[0]}", {"fields": errors}, code="invalid")
