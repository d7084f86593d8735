"""The test database moved along the migration graph, for the tests of a data migration: to the
state just before it, just after it, and back to today's schema for the tests that follow.

A migration whose app depends on no other (`clients` up to today) is tested on an empty database
of its own instead (`scratch_database`): moving the shared test database back to such a
migration unapplies every later migration of every app that depends on it (73 for
`clients.0011`), which costs Django's migration state about two minutes of CPU there and back,
past the per-test timeout on a loaded 2-core box. The scratch database is of the same vendor,
migrated from nothing along that app's own graph; while a test holds it, a database router sends
every query there (the migrations' own functions included, which use the default manager)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import StateApps
from django.test import override_settings

SCRATCH = "migration_scratch"


def migrate(
    targets: list[tuple[str, str]], *, using: BaseDatabaseWrapper | None = None
) -> StateApps:
    """Migrate the test database (or the one `using` names) to `targets`; the models as they
    were there (a data migration is tested through its own era's models, not today's)."""
    executor = MigrationExecutor(using or connection)
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


@pytest.fixture
def scratch_database(db: None, tmp_path: Path) -> Iterator[BaseDatabaseWrapper]:
    """An empty database of the test database's vendor under the alias `migration_scratch`,
    where every query goes while the test runs; dropped afterwards. The test database is not
    touched."""
    settings = dict(connection.settings_dict)
    if connection.vendor == "sqlite":
        settings["NAME"] = str(tmp_path / "scratch.sqlite3")
    else:
        settings["NAME"] = f"{connection.settings_dict['NAME']}_scratch"
        _create_or_drop("DROP DATABASE IF EXISTS", settings["NAME"])
        _create_or_drop("CREATE DATABASE", settings["NAME"])
    scratch = connections[DEFAULT_DB_ALIAS].__class__(settings, SCRATCH)
    connections[SCRATCH] = scratch
    try:
        with override_settings(DATABASE_ROUTERS=[f"{__name__}.ScratchRouter"]):
            yield scratch
    finally:
        scratch.close()
        del connections[SCRATCH]
        if connection.vendor != "sqlite":
            _create_or_drop("DROP DATABASE IF EXISTS", settings["NAME"])


class ScratchRouter:
    """Every read and write to the scratch database."""

    def db_for_read(self, model: type, **hints: object) -> str:
        return SCRATCH

    def db_for_write(self, model: type, **hints: object) -> str:
        return SCRATCH


def _create_or_drop(statement: str, name: str) -> None:
    # CREATE/DROP DATABASE cannot run inside the test's transaction: Django's own
    # maintenance-database cursor, as its test runner uses to create the test database.
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"{statement} {connection.ops.quote_name(name)}")
