"""Database connections around network waits.

A turn spends most of its life waiting on the model and on tool webhooks. Many turns run at once
in one worker process (a Celery thread pool, docs/deployment.md), so a turn must not keep a
database connection while it waits: `release_connection()` hands this thread's connection back
(to Django's psycopg pool in production, else it closes it) right before such a wait, and the
next query takes one again. It does nothing inside `transaction.atomic()` — a transaction keeps
its connection — which also makes it a no-op in tests that wrap each test in a transaction.

Call sites (the only ones): the LLM gateway before each model request
(`apps.reasoning.llm.llm_complete`) and the webhook executor before each call
(`apps.tools.executors.webhook.run_webhook`); the async event streams after each read
(`apps.conversations.events`)."""

from __future__ import annotations

from django.db import connections


def release_connection(alias: str = "default") -> None:
    """Give this thread's connection back unless a transaction is open on it."""
    connection = connections[alias]
    if connection.connection is None or connection.in_atomic_block:
        return
    connection.close()
