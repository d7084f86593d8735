"""The retail world served for real (its signed webhook and its MCP server), for the tests of the
server itself and of GuideDesk's executors acting on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from apps.certify.retail.server import RetailServer
from apps.certify.retail.world import Order


@pytest.fixture
def server() -> Iterator[RetailServer]:
    """A fresh world per test (seed 42): what one test's calls change, the next never sees."""
    with RetailServer(42) as running:
        yield running


def pending_order(server: RetailServer) -> Order:
    """An order of the served world that is still pending, so a cancel can act on it."""
    return next(o for o in server.runtime.initial.orders.values() if o.status == "pending")
