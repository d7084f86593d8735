"""What the standalone benchmark scripts share: Django on a throwaway database, and throttles
that run without ever refusing."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit


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


def unthrottled(rest: Mapping[str, Any]) -> dict[str, Any]:
    """``REST_FRAMEWORK`` with every throttle rate at a million a minute: the throttles still
    run (their cost is part of the number); they just never refuse."""
    rates = dict.fromkeys(rest["DEFAULT_THROTTLE_RATES"], "1000000/min")
    return {**rest, "DEFAULT_THROTTLE_RATES": rates}
