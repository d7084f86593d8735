"""What the standalone benchmark scripts share: Django on a throwaway database, throttles that
run without ever refusing, and the fake model answering at once."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

WIDGET_CONVERSATIONS = "/api/v1/widget/conversations"


@contextlib.contextmanager
def throwaway_django(prefix: str, database_url: str = "") -> Iterator[None]:
    """Django set up with the test settings and no broker, on a migrated throwaway database: a
    SQLite file in a temporary folder named ``prefix…``, or with ``database_url`` a database
    created on that PostgreSQL server and dropped at the end (``throwaway_postgres``). It never
    touches the project's database."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ.pop("CELERY_BROKER_URL", None)
    with contextlib.ExitStack() as stack:
        if database_url:
            os.environ["DATABASE_URL"] = stack.enter_context(throwaway_postgres(database_url))
        else:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix))
            os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/bench.sqlite3"
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        yield


@contextlib.contextmanager
def throwaway_postgres(server_url: str) -> Iterator[str]:
    """Create `bench_turn_overhead_<pid>` on the server of `server_url` (connecting to the URL's
    own database only to issue CREATE / DROP DATABASE), yield its URL, drop it afterwards."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(server_url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise SystemExit("--database-url must be a postgres:// URL")
    name = f"bench_turn_overhead_{os.getpid()}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


@contextlib.contextmanager
def instant_fake_llm(**settings: Any) -> Iterator[Any]:
    """The fake model (devtools/fake_llm.py) answering with no added latency, the LLM gateway
    pointed at it and Celery tasks run eagerly in this thread, with any further ``settings``
    overridden too; yields the server (to script its replies)."""
    from django.test.utils import override_settings

    from devtools.fake_llm import FakeLLMServer

    with (
        FakeLLMServer(latency=0) as llm,
        override_settings(
            OPENAI_API_KEY="bench-key",
            OPENAI_BASE_URL=llm.base_url,
            CELERY_TASK_ALWAYS_EAGER=True,
            **settings,
        ),
    ):
        yield llm


def unthrottled(rest: Mapping[str, Any]) -> dict[str, Any]:
    """``REST_FRAMEWORK`` with every throttle rate at a million a minute: the throttles still
    run (their cost is part of the number); they just never refuse."""
    rates = dict.fromkeys(rest["DEFAULT_THROTTLE_RATES"], "1000000/min")
    return {**rest, "DEFAULT_THROTTLE_RATES": rates}


def widget_start(http: Any, body: Mapping[str, Any] | None = None, **request: Any) -> Any:
    """Start a widget conversation with the test HTTP client `http` (``body``: a signed-in
    customer's fields), ``request`` as for its requests (``REMOTE_ADDR``…): the conversation
    as the widget API returns it (its ``id`` and ``token``…)."""
    return http.post(
        WIDGET_CONVERSATIONS, dict(body or {}), content_type="application/json", **request
    ).json()


def widget_send(http: Any, conversation: Mapping[str, Any], text: str, **request: Any) -> Any:
    """POST `text` as the visitor's message to `conversation` (its ``id`` and ``token``, as the
    widget API started it) with the test HTTP client `http`, ``request`` as for its requests
    (``REMOTE_ADDR``…): the response."""
    return http.post(
        f"{WIDGET_CONVERSATIONS}/{conversation['id']}/messages",
        {"text": text},
        content_type="application/json",
        headers={"Authorization": f"Bearer {conversation['token']}"},
        **request,
    )


def widget_tenant(origin: str, **client_fields: Any) -> tuple[Any, Any]:
    """A tenant on an adaptive plan whose widget answers `origin`, every request from one
    address (one visitor, so no per-visitor daily budget), and a test HTTP client posting as
    that page: the tenant and the HTTP client."""
    from django.test import Client as HttpClient

    from apps.clients.models import AIMode, Client, Plan

    plan = Plan.objects.create(
        slug="bench", name="Bench", ai_mode=AIMode.ADAPTIVE, visitor_daily_token_budget=0
    )
    client = Client.objects.create(
        slug="bench",
        name="Bench Outfitters",
        plan=plan,
        allowed_origins=[origin],
        **client_fields,
    )
    http = HttpClient(headers={"Origin": origin, "X-Widget-Key": client.widget_key})
    return client, http
