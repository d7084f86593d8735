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
(`apps.conversations.events`)."""

from __future__ import annotations

from django.db import connections


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
