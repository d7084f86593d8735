"""The one way to run raw SQL: each statement is a reviewed site, named in the lists below.

The tenant guard (apps/core/tenancy.py) sees ORM querysets only. A statement written by hand
goes around it, so every one is reviewed here instead: it runs through `sql_rows()` (rows) or
`sql_models()` (model instances) under its site name, and the name is in one of two lists —

- `CLIENT_SQL`: the statement reads or writes tenant-owned rows of ONE client, and says so in
  its WHERE clause (`client_id = %s`); the call passes that client's id, which must be among
  the statement's parameters and must match the enclosing `tenant_scope`, if any;
- `PLATFORM_SQL`: the statement touches no tenant-owned row (a health probe, the lookup that
  finds the tenant, planner statistics); the call passes `client_id=None`.

A site not in a list raises `TenantScopeError`. `scripts/tenancy_audit.py` (run by
`make ci-checks`) fails on any `cursor()`, `.raw(`, `RawSQL`, `.extra(` or `_base_manager`
outside this module, on a listed site that nothing runs and on a site name that is not listed.
Adding a statement = one entry here, reviewed like the statement itself.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connection, connections, models
from django.db.models import signals
from django.db.models.base import DEFERRED

from apps.core.tenancy import TenantScopeError, current_tenant

# site → what the statement does and how it is bound to its client.
CLIENT_SQL: dict[str, str] = {
    "conversations.history": (
        "SELECT one conversation's (client_id AND conversation_id) last visible messages"
    ),
    "conversations.get": "SELECT one client's (client_id) conversation by its id or public id",
    "conversations.lock": (
        "SELECT one conversation's (id AND client_id) status, language and last_seq, locking"
        " its row"
    ),
    "conversations.message_insert": "INSERT one message of one client (client_id)",
    "conversations.take_seq": (
        "UPDATE one conversation (id AND client_id) to take its next seq, RETURNING it"
    ),
    "reasoning.live_state": (
        "SELECT one conversation's status, last_seq and running trace (client_id on both)"
    ),
    "reasoning.customer_message": (
        "SELECT one customer message (client_id AND id) and the status of its turn's trace"
        " (client_id)"
    ),
    "reasoning.trace_insert": "INSERT one turn's trace of one client (client_id)",
    "reasoning.step_insert": "INSERT one step of one client's trace (client_id)",
    "reasoning.take_turn_lock": (
        "UPDATE one conversation (id AND client_id) to take its turn lock unless an earlier"
        " message of it (client_id AND conversation_id) waits; RETURNING its id"
    ),
    "reasoning.release_turn_lock": (
        "UPDATE one conversation (id AND client_id) to release its turn lock, RETURNING status"
    ),
    "reasoning.trace_count": (
        "UPDATE one trace (id AND client_id) to add one LLM call's tokens and cost"
    ),
    "approvals.open_exist": (
        "SELECT whether one conversation (client_id AND conversation_id) has open requests"
    ),
    "billing.usage_insert": "INSERT one LLM call's usage record of one client (client_id)",
    "billing.reservation_held": (
        "SELECT whether one client's (client_id) turn holds a reservation or a dead worker's"
        " reservation waits to be settled"
    ),
    "billing.counter_admit": (
        "UPDATE one client's (client_id) monthly counter to hold one turn while the budgets"
        " leave room, RETURNING its id"
    ),
    "billing.reservation_settle": (
        "UPDATE one reservation (id AND client_id) to committed while it is still as its turn"
        " holds it, RETURNING its id"
    ),
    "billing.counter_settle": (
        "UPDATE one client's (client_id) monthly counter to settle one turn, RETURNING the"
        " figures used"
    ),
    "billing.visitor_day": (
        "SELECT one visitor's day (client_id) and whether a turn's allowance (client_id) is"
        " held there or a dead worker's waits to be settled"
    ),
    "billing.visitor_admit": (
        "UPDATE one visitor's day (id AND client_id) to hold one turn while its budget leaves"
        " room, RETURNING its id"
    ),
    "billing.allowance_settle": (
        "UPDATE one turn allowance (id AND client_id) to committed while it is still as its"
        " turn holds it, RETURNING its id"
    ),
    "billing.visitor_settle": (
        "UPDATE one visitor's day (id AND client_id) to settle one turn, RETURNING its id"
    ),
    "billing.conversation_visitor": (
        "INSERT one conversation's (client_id) visitor, or UPDATE its row (client_id matched)"
        " when the visitor changed"
    ),
    "billing.conversation_so_far": (
        "SELECT one conversation's tokens, visitor and recent deliberative turns: every"
        " table matched on client_id"
    ),
    "knowledge.pg_counts": "PostgreSQL full-text document counts of one client's chunks",
    "knowledge.pg_ranking": "PostgreSQL full-text ranking of one client's published chunks",
    "knowledge.sqlite_ranking": "SQLite FTS5 ranking of one client's published chunks",
    "tools.for_turn": "SELECT one client's (client_id) tools, by name",
    "tools.pending_touched": (
        "SELECT whether one client's (client_id) question is open in a conversation or was"
        " settled by a message"
    ),
    "widget.messages_after": "SELECT one conversation's visible messages (client_id AND id)",
}
PLATFORM_SQL: dict[str, str] = {
    "core.healthz": "SELECT 1: the database answers; no table",
    "benchmarks.analyze_conversations": "ANALYZE of the benchmark's tables: planner statistics",
    "benchmarks.analyze_all": "ANALYZE of the whole database after a bulk load; no rows read",
    "benchmarks.vacuum_knowledge": "VACUUM ANALYZE of the benchmark's tables after a bulk load",
}

Params = Sequence[Any] | Mapping[str, Any]


def _reviewed(site: str, params: Params, client_id: int | None) -> None:
    if site in CLIENT_SQL:
        values = params.values() if isinstance(params, Mapping) else params
        if client_id is None or client_id not in values:
            raise TenantScopeError(
                f"SQL site {site!r} reads one client's rows: pass client_id and bind it "
                "as a parameter of the statement (WHERE client_id = %s)."
            )
        current = current_tenant()
        if current is not None and current != client_id:
            raise TenantScopeError(
                f"SQL site {site!r} for client {client_id} inside tenant_scope({current}): "
                "another client's rows are out of reach here."
            )
    elif site in PLATFORM_SQL:
        if client_id is not None:
            raise TenantScopeError(f"SQL site {site!r} is a platform statement: no client_id.")
    else:
        raise TenantScopeError(
            f"SQL site {site!r} is not reviewed: add it to CLIENT_SQL or PLATFORM_SQL in "
            "apps/core/tenant_sql.py, saying how the statement is bound to its client."
        )


def sql_rows(
    site: str, sql: str, params: Params = (), *, client_id: int | None
) -> list[tuple[Any, ...]]:
    """Run one reviewed statement on the default database; its rows (`[]` when it returns
    none)."""
    _reviewed(site, params, client_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def sql_models[M: models.Model](
    site: str, model: type[M], sql: str, params: Params = (), *, client_id: int | None
) -> list[M]:
    """Run one reviewed SELECT as `model` instances, as Django's `raw()` builds them: columns by
    name (the primary key among them), the fields not selected deferred, any other column an
    attribute, the database's values converted as the ORM would. Built here directly from the
    rows, at a fraction of `raw()`'s CPU: hot reads of the turn and the widget go through it."""
    _reviewed(site, params, client_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = tuple(column[0] for column in cursor.description)
        rows = cursor.fetchall()
    if not rows:
        return []
    plan = _row_plan(model, columns, connection.alias)
    found = []
    for row in rows:
        values = list(plan.deferred)
        for at, (position, converters, field) in plan.fields.items():
            value = row[at]
            for converter in converters:
                value = converter(value, field, connection)
            values[position] = value
        instance = model.from_db(connection.alias, plan.names, values)
        for at, name in plan.extra:
            setattr(instance, name, row[at])
        found.append(instance)
    return found


def with_tables(statement: str, **parts: type[models.Model] | str) -> str:
    """`statement` with each `{name}` filled in: a model's quoted table name, or a fragment the
    code wrote (a condition, a column list; never a value, which goes in as a parameter)."""
    qn = connection.ops.quote_name
    return statement.format(
        **{
            name: part if isinstance(part, str) else qn(part._meta.db_table)
            for name, part in parts.items()
        }
    )


@functools.cache
def model_columns(model: type[models.Model], alias: str = "") -> str:
    """The quoted columns of `model`'s concrete fields, comma-separated, each as `alias.column`
    when an alias is given: the SELECT list of whole rows for `sql_models`."""
    qn = connection.ops.quote_name
    prefix = f"{alias}." if alias else ""
    columns = [field.column for field in model._meta.concrete_fields if field.column]
    return ", ".join(f"{prefix}{qn(column)}" for column in columns)


def sql_insert[M: models.Model](site: str, instance: M) -> M:
    """INSERT one new row of `instance` under a reviewed site, as `save(force_insert=True)`
    would: the instance's values (defaults included), `auto_now` / `auto_now_add` stamped by
    the fields' `pre_save`, each value prepared by its field, the primary key read back and the
    instance marked saved — for a fraction of the ORM's CPU: the rows every widget message and
    every turn write. The model's own `save()` is not run (use it only where that adds nothing
    to an insert); a model with `pre_save` / `post_save` receivers is saved by Django instead,
    so none of them is skipped. The same errors as `save()`: `IntegrityError`…"""
    model = type(instance)
    client_id = getattr(instance, "client_id", None)
    if signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model):
        _reviewed(site, [client_id], client_id)
        instance.save(force_insert=True)
        return instance
    # As save() does: an unsaved related object raises; one saved since it was set gives its id.
    instance._prepare_related_fields_for_save(operation_name="save")  # type: ignore[attr-defined]
    meta = model._meta
    fields = [
        field
        for field in meta.local_concrete_fields
        if not (field is meta.auto_field and getattr(instance, field.attname) is None)
    ]
    params = [
        field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields
    ]
    _reviewed(site, params, client_id)
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, tuple(fields)), params)
        (pk,) = cursor.fetchone()
    setattr(instance, meta.pk.attname, pk)
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


@functools.lru_cache(maxsize=64)
def _insert_sql(model: type[models.Model], fields: tuple[models.Field[Any, Any], ...]) -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(qn(str(field.column)) for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    return (
        f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
        f" RETURNING {qn(str(model._meta.pk.column))}"
    )


@dataclass(frozen=True)
class _RowPlan:
    """How `sql_models` turns one statement's rows into instances of a model."""

    names: tuple[str, ...]  # the attnames selected, as `Model.from_db` takes them
    deferred: tuple[Any, ...]  # a row of DEFERRED, one per concrete field
    fields: dict[int, tuple[int, tuple[Any, ...], models.Field[Any, Any]]]  # column → field
    extra: tuple[tuple[int, str], ...]  # columns that are no field: set as attributes


@functools.lru_cache(maxsize=256)
def _row_plan(model: type[models.Model], columns: tuple[str, ...], alias: str) -> _RowPlan:
    db = connections[alias]
    concrete = model._meta.concrete_fields
    by_column = {field.column: (position, field) for position, field in enumerate(concrete)}
    fields = {}
    extra = []
    for at, column in enumerate(columns):
        if column in by_column:
            position, field = by_column[column]
            col = field.get_col(model._meta.db_table)
            converters = (*db.ops.get_db_converters(col), *col.get_db_converters(db))
            fields[at] = (position, converters, field)
        else:
            extra.append((at, column))
    if model._meta.pk.column not in columns:
        raise FieldDoesNotExist("Raw query must include the primary key")
    names = tuple(field.attname for _, _, field in sorted(fields.values(), key=lambda f: f[0]))
    return _RowPlan(
        names=names,
        deferred=tuple(DEFERRED for _ in concrete),
        fields=fields,
        extra=tuple(extra),
    )
