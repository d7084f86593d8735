"""The test database moved along the migration graph, for the tests of a data migration: to the
state just before it, just after it, and back to today's schema for the tests that follow."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps


def migrate(targets: list[tuple[str, str]]) -> StateApps:
    """Migrate the test database to `targets`; the models as they were there (a data migration
    is tested through its own era's models, not today's)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest() -> list[tuple[str, str]]:
    """The whole graph's leaves: today's schema, which the other tests expect."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def at_latest() -> Iterator[None]:
    """Whatever state a test leaves the database in, the next test finds today's schema."""
    yield
    migrate(latest())
