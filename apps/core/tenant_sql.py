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

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, models

from apps.core.tenancy import TenantScopeError, current_tenant

# site → what the statement does and how it is bound to its client.
CLIENT_SQL: dict[str, str] = {
    "conversations.history": (
        "SELECT one conversation's (client_id AND conversation_id) last visible messages"
    ),
    "conversations.take_seq": (
        "UPDATE one conversation (id AND client_id) to take its next seq, RETURNING it"
    ),
    "reasoning.live_state": (
        "SELECT one conversation's status, last_seq and running trace (client_id on both)"
    ),
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
    "billing.conversation_so_far": (
        "SELECT one conversation's tokens, visitor and recent deliberative turns: every"
        " table matched on client_id"
    ),
    "knowledge.pg_counts": "PostgreSQL full-text document counts of one client's chunks",
    "knowledge.pg_ranking": "PostgreSQL full-text ranking of one client's published chunks",
    "knowledge.sqlite_ranking": "SQLite FTS5 ranking of one client's published chunks",
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
    """Run one reviewed SELECT as `model` instances (Django's `raw()`: columns by name, the
    database's values converted as the ORM would)."""
    _reviewed(site, params, client_id)
    return list(model._base_manager.raw(sql, params))
