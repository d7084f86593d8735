"""Each app's migrations are squashed into one or two, which list the landed ones they replace.
A database that applied the whole old history counts as migrated and gets nothing applied twice;
one that applied only part of it is refused with the way out; a new database gets what the old
history's hand-written steps made (the shipped rubrics, the search indexes and tables)."""

from __future__ import annotations

import pytest
from django.core.checks import Error
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from apps.clients.models import Rubric
from apps.clients.rubrics import BUILTIN
from apps.core.checks import check_no_half_applied_squash

pytestmark = pytest.mark.django_db


def _squashed() -> dict[tuple[str, str], list[tuple[str, str]]]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return {key: m.replaces for key, m in loader.disk_migrations.items() if m.replaces}


def _recorded_as_the_old_history(*, leaving_out: tuple[str, str] | None = None) -> None:
    """The test database's migration records, as a database migrated before the squash has
    them: every replaced migration, none of the squashed ones (rolled back with the test)."""
    squashed = _squashed()
    recorder = MigrationRecorder(connection)
    recorder.migration_qs.filter(app__in={app for app, _ in squashed}).delete()
    for app, name in sorted({old for olds in squashed.values() for old in olds}):
        if (app, name) != leaving_out:
            recorder.record_applied(app, name)


def test_every_migration_of_ours_is_a_squash_and_no_old_name_is_reused() -> None:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    ours = {k for k, m in loader.disk_migrations.items() if type(m).__module__.startswith("apps.")}
    squashed = _squashed()
    assert ours == set(squashed)
    old = {o for olds in squashed.values() for o in olds}
    assert not old & set(loader.disk_migrations)
    for (app, _), olds in squashed.items():
        assert {a for a, _ in olds} == {app}


def test_a_database_with_the_whole_old_history_has_nothing_to_apply() -> None:
    _recorded_as_the_old_history()
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    assert check_no_half_applied_squash(databases=["default"]) == []
    # `migrate` then records the squashed ones as applied too.
    executor.check_replacements()
    applied = MigrationRecorder(connection).applied_migrations()
    assert set(_squashed()) <= set(applied)


def test_a_database_part_way_along_the_old_history_is_refused_with_the_way_out() -> None:
    missing = ("clients", "0023_plan_deliberation_settings")
    _recorded_as_the_old_history(leaving_out=missing)
    errors = check_no_half_applied_squash(databases=["default"])
    assert [(type(e), e.id) for e in errors] == [(Error, "guidedesk.E002")]
    assert "clients.0001_squashed_0023" in errors[0].msg
    assert "24 of the 25" in errors[0].msg
    assert "a5b730bd" in (errors[0].hint or "")
    with pytest.raises(SystemCheckError, match=r"guidedesk\.E002"):
        call_command("migrate", skip_checks=False, interactive=False, verbosity=0)


def test_a_new_database_has_the_shipped_rubrics() -> None:
    for slug, shipped in BUILTIN.items():
        rubric = Rubric.objects.get(slug=slug)
        assert rubric.name == shipped["name"]
        assert rubric.principles == shipped["principles"]


def test_a_new_database_has_the_search_indexes_and_tables() -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            indexes = {
                name
                for table in ("knowledge_articlechunk", "notes_note", "conversations_message")
                for name in connection.introspection.get_constraints(cursor, table)
            } | set(connection.introspection.get_constraints(cursor, "conversations_conversation"))
            assert {
                "knowledge_chunk_search_gin",
                "notes_search_vector_gin",
                "conversations_message_text_trgm",
                "conversations_conversation_email_trgm",
            } <= indexes
        else:
            assert "knowledge_chunk_fts" in connection.introspection.table_names(cursor)
