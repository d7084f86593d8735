"""Client rows, with their plan, kept in each process for a few seconds.

Every widget request resolves its client by its key, and every turn reads its client and plan:
a join of two wide rows whose building and decoding cost more CPU than most of the turn's other
queries (devtools/benchmarks/turn_profile.py). Those reads come from here instead. An entry lives
`SECONDS`; a save, delete or queryset update of any client or plan in this process forgets
every entry at once, so a process always sees its own changes; another process (a second web
or worker process) sees a change within `SECONDS`. Each caller gets its own copy, so nothing
it sets on the instance reaches another request or turn."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import models
from django.db.models.base import ModelState

if TYPE_CHECKING:
    from apps.clients.models import Client

SECONDS = 5.0
MAX_ENTRIES = 1000

_entries: dict[tuple[str, Any], tuple[float, Any]] = {}
_lock = threading.Lock()


def forget_all(*args: Any, **kwargs: Any) -> None:
    """Forget every cached row (also a signal receiver: any arguments are ignored)."""
    with _lock:
        _entries.clear()


class RowCacheQuerySet(models.QuerySet):
    """The client's and the plan's queryset: bulk writes forget the cached rows too (before,
    and after, so a read racing the write cannot keep the old row)."""

    def update(self, **kwargs: Any) -> int:
        return _forgetting(lambda: super(RowCacheQuerySet, self).update(**kwargs))

    def delete(self) -> tuple[int, dict[str, int]]:
        return _forgetting(lambda: super(RowCacheQuerySet, self).delete())

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        return _forgetting(
            lambda: super(RowCacheQuerySet, self).bulk_update(objs, fields, batch_size=batch_size)
        )


def _forgetting[T](write: Callable[[], T]) -> T:
    forget_all()
    try:
        return write()
    finally:
        forget_all()


def client_cached(**lookup: Any) -> Client | None:
    """The one client matching `lookup` (`pk=…` or `widget_key=…`), its plan loaded, or None.
    A missing client is never cached: one created a moment later is found at once."""
    from apps.clients.models import Client

    ((field, value),) = lookup.items()
    key = (field, value)
    now = time.monotonic()
    entry = _entries.get(key)
    if entry is None or entry[0] <= now:
        found = Client.objects.select_related("plan").filter(**lookup).first()
        if found is None or SECONDS <= 0:
            return found
        with _lock:
            if len(_entries) >= MAX_ENTRIES:
                _entries.clear()
            _entries[key] = entry = (now + SECONDS, found)
    return _copy(entry[1])


def _copy[M: models.Model](instance: M) -> M:
    """A fresh instance with the same values; JSON values (dicts, lists) copied too."""
    new = instance.__class__.__new__(instance.__class__)
    new.__dict__.update(
        {
            name: json.loads(json.dumps(value)) if isinstance(value, dict | list) else value
            for name, value in instance.__dict__.items()
            if name not in ("_state", "_prefetched_objects_cache")
        }
    )
    state = ModelState()
    state.db, state.adding = instance._state.db, False
    new._state = state
    for name, related in instance._state.fields_cache.items():
        state.fields_cache[name] = _copy(related) if related is not None else None
    return new
