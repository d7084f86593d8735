"""The fault suite (marker `faults`): each fault of docs/operations.md injected against PostgreSQL
and Redis — backends terminated (only this test database's), a worker process SIGKILLed, a
broker of our own stopped, endpoints that trickle — and each test asserts what a customer would
notice. Skipped without PostgreSQL (and, for the worker and broker faults, without a broker);
CI runs them (`.ci/run`). Short deadlines and leases (tests/faults/settings.py) keep each fault
to seconds."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kombu.pools
import psycopg
import pytest
from django.conf import settings
from django.db import connection

from apps.conversations.models import Conversation, Message
from apps.reasoning.models import ReasoningTrace
from tests.support import procfile
from tests.widget.conftest import Widget

ROOT = Path(__file__).resolve().parents[2]
ON_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
BROKER_URL = settings.TEST_BROKER_URL

needs_postgres = pytest.mark.skipif(
    not ON_POSTGRES, reason="fault suite: needs PostgreSQL (DATABASE_URL), as in CI"
)
needs_broker = pytest.mark.skipif(
    not (ON_POSTGRES and BROKER_URL),
    reason="fault suite: needs PostgreSQL and a broker (CELERY_BROKER_URL), as in CI",
)


def _dsn() -> dict[str, Any]:
    db = connection.settings_dict
    return {
        "dbname": db["NAME"],
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
    }


def terminate_backends() -> int:
    """Terminate every other connection to THIS test database (never another database's —
    other suites share the server). Returns how many were terminated."""
    with psycopg.connect(**_dsn(), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def assert_interrupted_turn_finished() -> None:
    """The one customer message is kept and its turn, cut off by the fault, finished on a retry:
    a done trace that records the interruption, and no turn lock left behind."""
    unscoped = "test checks the database directly"
    assert Message.objects.unscoped(unscoped).filter(role="user").count() == 1
    trace = ReasoningTrace.objects.unscoped(unscoped).get()
    assert trace.status == "done"
    assert "interrupted" in list(trace.steps.values_list("name", flat=True))
    assert Conversation.objects.unscoped(unscoped).get().turn_lock_until is None


def database_url() -> str:
    dsn = _dsn()
    auth = dsn["user"] or ""
    if dsn["password"]:
        auth += f":{dsn['password']}"
    host = f"{dsn['host'] or '127.0.0.1'}:{dsn['port'] or 5432}"
    return f"postgres://{auth}@{host}/{dsn['dbname']}"


@contextlib.contextmanager
def production_web(tmp_path: Path, **extra: str) -> Iterator[str]:
    """The Procfile's `web` command under production settings on the test database (migrated by
    the test run; nothing served here needs collected static files). Yields its base URL; its
    output goes to `tmp_path / "web.log"`. `extra` overrides the environment."""
    port = procfile.free_port()
    env = procfile.process_env(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "SECRET_KEY": "pool-fault-test-secret-key-0123456789-abcdefghijklmnopqrstuv",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": database_url(),
            # Required in production. Nothing listens there: a turn cannot be queued and runs
            # in the web process (the broker-down path).
            "CELERY_BROKER_URL": "redis://127.0.0.1:9/0",
            "STATIC_ROOT": str(tmp_path / "static"),
            "SECURE_SSL_REDIRECT": "False",
            "SECURE_HSTS_SECONDS": "0",
            "EMAIL_URL": "smtp://127.0.0.1:1",
            "WEB_CONCURRENCY": "1",
            "PORT": str(port),
            **extra,
        }
    )
    log = tmp_path / "web.log"
    web = procfile.start("web", env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        procfile.wait_for_http(url + "/healthz", web, log)
        yield url
    finally:
        procfile.stop(web)
        print(log.read_text()[-6000:])  # noqa: T201  (shown when the test fails)


def child_env(**extra: str) -> dict[str, str]:
    """Environment of a process the suite starts: the fault settings on the test database."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.faults.settings",
        "DATABASE_URL": database_url(),
        "PYTHONPATH": str(ROOT),
        "CELERY_BROKER_URL": "",
    }
    env.update(extra)
    return env


def wait_for(check: Callable[[], Any], timeout: float, step: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy; None after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(step)
    return None


class Process:
    """A child process with its output in a log file (shown when a test fails)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.args, env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up, no acknowledgement — like the OOM killer or a lost node."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def dump_stacks(self) -> None:
        """Ask the child for every thread's stack (tests/faults/settings.py registers it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR2)
            time.sleep(1)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[..., Process]]:
    started: list[Process] = []

    def start(name: str, args: list[str], **env: str) -> Process:
        process = Process(args, child_env(**env), tmp_path / f"{name}.log").start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


PYTHON = sys.executable


@pytest.fixture
def widget(shop: Any) -> Widget:
    return Widget(shop)


def _reset_celery_connections() -> None:
    # Connections and producers are cached per broker URL; drop them when the URL changes.
    from config.celery import app as celery_app

    if celery_app._pool is not None:
        celery_app._pool.force_close_all()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    kombu.pools.reset()  # producer pools are also cached per connection, process-wide


@contextmanager
def publishing_to(broker_url: str) -> Iterator[None]:
    """This process publishes turns to `broker_url` (instead of running them eagerly)."""
    from config.celery import app as celery_app

    keys = ("broker_url", "broker_write_url", "task_always_eager", "broker_transport_options")
    previous = {key: celery_app.conf.get(key) for key in keys}
    celery_app.conf.update(
        broker_url=broker_url,
        # (Celery reads the CELERY_BROKER_URL environment variable before broker_url; the
        # write URL is what publishing uses, and it is taken from the configuration.)
        broker_write_url=broker_url,
        task_always_eager=False,
        broker_transport_options={"socket_timeout": 2, "socket_connect_timeout": 2},
    )
    _reset_celery_connections()
    try:
        yield
    finally:
        celery_app.conf.update(previous)
        _reset_celery_connections()


CELERY = str(Path(sys.executable).with_name("celery"))


def worker_args(*extra: str) -> list[str]:
    return [
        CELERY,
        "-A",
        "config",
        "worker",
        "--pool",
        "solo",
        "--without-mingle",
        "--without-gossip",
        "--without-heartbeat",
        "-l",
        "info",
        *extra,
    ]


def beat_args(tmp: Path) -> list[str]:
    return [CELERY, "-A", "config", "beat", "-l", "info", "--pidfile=", "-s", str(tmp / "beat")]
