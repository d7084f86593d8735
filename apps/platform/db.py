"""Database connections around network waits.

A turn spends most of its life waiting on the model and on tool webhooks. Many turns run at once
in one worker process (a Celery thread pool, docs/deployment.md), so a turn must not keep a
database connection while it waits: `release_connection()` hands this thread's connection back
(to Django's psycopg pool in production) right before such a wait, and the
next query takes one again. It does nothing inside `transaction.atomic()` — a transaction keeps
its connection — which also makes it a no-op in tests that wrap each test in a transaction.

Call sites (the only ones): the LLM gateway before each model request
(`apps.reasoning.llm.llm_complete`) and the webhook executor before each call
(`apps.tools.executors.webhook.run_webhook`); the async event streams after each read
(`apps.conversations.events`).

Connections the database dropped while they sat in the pool (a restart, a failover, a pooler or
`pg_terminate_backend` ending them) are all discarded at once: `SweepOnFailedCheck` is the pool's
`check` (the production backend, apps/platform/postgresql/base.py, passes it)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connections
from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)


def release_connection(alias: str = "default", *, without_pool: bool = False) -> None:
    """Give this thread's connection back to the pool unless a transaction is open on it. By
    default only with Django's connection pool configured (production on PostgreSQL): without
    one, closing would only cost a reconnect. `without_pool=True` closes it anyway — for threads
    borrowed by the event loop, which must not keep connections of their own."""
    connection = connections[alias]
    if not without_pool and not (connection.settings_dict.get("OPTIONS") or {}).get("pool"):
        return
    if connection.connection is None or connection.in_atomic_block:
        return
    connection.close()


class SweepOnFailedCheck:
    """The pool's `check`: `ConnectionPool.check_connection` (an empty query, ~0.1 ms) as each
    connection leaves the pool; and when one fails it, `pool.check()` right away, which tests
    every connection then in the pool and replaces each dead one (new ones are opened by the
    pool's workers). The database drops connections together — a restart or a failover ends all
    of them — and without the sweep psycopg_pool hands the dead ones to the waiting request one
    at a time, sleeping 0, 1, 2, 4, 8, 16 s between them: a pool of ten or more dropped
    connections took a request past the 30 s pool timeout (a 503). With it, a request meets at
    most the one dead connection it took before the sweep, and waits only for a fresh one."""

    def __init__(self) -> None:
        self.pool: ConnectionPool[Any] | None = None  # set once the pool exists

    def __call__(self, conn: Any) -> None:
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            if self.pool is not None:
                self._sweep(self.pool)
            raise

    @staticmethod
    def _sweep(pool: ConnectionPool[Any]) -> None:
        lost_before = pool.get_stats().get("connections_lost", 0)
        pool.check()
        discarded = pool.get_stats().get("connections_lost", 0) - lost_before
        logger.warning(
            "database connection pool %s: a connection failed its check; "
            "discarded %d dropped connections at once",
            pool.name,
            discarded,
        )
