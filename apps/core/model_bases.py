"""Field factories for the fields most models share, each one concept spelled out once.

- `optional_fk`: a link that may be empty. By default it is emptied (SET_NULL) when the row it
  points to is deleted — who decided, the trace a row came from, the message that resolved it:
  the row outlives what it points to. `on_delete` says otherwise (CASCADE: an optional owner).
- `conversation_fk`: a row that belongs to one conversation and goes with it (CASCADE).
- `status_field`: where a row is in its life, one of a TextChoices, starting at a default.

Each link takes `one_to_one=True` for a link at most one row may hold. They build exactly the
field a model would declare by hand (the same `deconstruct()`), so using one needs no migration;
where a field differs (a required link to another model, a status with its own label), the model
declares it itself. String references only: the kernel imports no app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

__all__ = ["conversation_fk", "optional_fk", "status_field"]


def _link_class(one_to_one: bool) -> type[models.ForeignKey[Any, Any]]:
    return models.OneToOneField if one_to_one else models.ForeignKey


def optional_fk(
    to: Any,
    verbose_name: StrOrPromise,
    *,
    related_name: str = "+",
    help_text: StrOrPromise = "",
    one_to_one: bool = False,
    on_delete: Any = models.SET_NULL,
) -> models.ForeignKey[Any, Any]:
    """A foreign key that may be empty; by default it is emptied when its target is deleted."""
    return _link_class(one_to_one)(
        to,
        null=True,
        blank=True,
        on_delete=on_delete,
        related_name=related_name,
        help_text=help_text,
        verbose_name=verbose_name,
    )


def conversation_fk(*, related_name: str, one_to_one: bool = False) -> models.ForeignKey[Any, Any]:
    """The conversation a row belongs to; the row is deleted with it."""
    return _link_class(one_to_one)(
        "conversations.Conversation",
        on_delete=models.CASCADE,
        related_name=related_name,
        verbose_name=_("conversation"),
    )


def status_field(
    default: models.TextChoices, *, max_length: int, db_index: bool = False
) -> models.CharField[Any, Any]:
    """Where a row is in its life: one of `default`'s choices, starting at `default`."""
    return models.CharField(
        max_length=max_length,
        choices=type(default).choices,
        default=default,
        db_index=db_index,
        verbose_name=_("status"),
    )
