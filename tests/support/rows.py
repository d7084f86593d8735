"""Database rows as plain tuples, for tests that compare what a request left behind."""

from __future__ import annotations

from typing import Any


def client_rows(model: Any, client: Any, *fields: str) -> list[tuple[Any, ...]]:
    """The client's rows of `model`, oldest first, as tuples of `fields`."""
    return list(model.objects.for_client(client).order_by("pk").values_list(*fields))
