"""Real headless Chromium (the system's /usr/bin/chromium; never a downloaded browser) driven by
Playwright's sync API against pytest-django's live server."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from apps.clients.models import Client
from apps.widget import apis as widget_apis
from apps.widget import streams as widget_streams
from tests.conftest import DEMO_TENANT, ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "ci-artifacts" / "screenshots"
# How long any Playwright action or `expect` waits for its event (an element, a response, a
# page) before the test fails. A wait ends as soon as its event happens, so a fast machine never
# waits longer for this; a loaded one (a 2-core box running other work) gets time to catch up.
# Playwright's own default for `expect` is 5 s, too short there. Tests set no shorter timeout of
# their own; a step known to take longer (a simulation run) says how long it may take.
TIMEOUT_MS = int(os.environ.get("BROWSER_TIMEOUT_SECONDS", "30")) * 1000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is not installed (browser tests use the system Chromium)"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop registered in this thread while it runs, which
    # Django takes for an async context. The ORM calls these tests make between browser steps
    # (and the test database set-up) are plain synchronous code, so say so.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        _default_timeouts(chromium, patch)
        yield chromium
        chromium.close()


def _default_timeouts(chromium: Any, patch: pytest.MonkeyPatch) -> None:
    """TIMEOUT_MS for every `expect`, and for every action of every page and context the tests
    open (`browser.new_page()` opens a context of its own, so both are covered)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    new_context, new_page = chromium.new_context, chromium.new_page

    def context_with_timeouts(*args: Any, **kwargs: Any) -> Any:
        context = new_context(*args, **kwargs)
        context.set_default_timeout(TIMEOUT_MS)
        context.set_default_navigation_timeout(TIMEOUT_MS)
        return context

    def page_with_timeouts(*args: Any, **kwargs: Any) -> Any:
        page = new_page(*args, **kwargs)
        page.context.set_default_timeout(TIMEOUT_MS)
        page.context.set_default_navigation_timeout(TIMEOUT_MS)
        return page

    patch.setattr(chromium, "new_context", context_with_timeouts)
    patch.setattr(chromium, "new_page", page_with_timeouts)


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def _holding[**P, R](lock: threading.RLock, func: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(func)
    def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        with lock:
            return func(*args, **kwargs)

    return locked


@pytest.fixture
def db_lock(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """On SQLite's in-memory test database every live-server thread (and this one) shares ONE
    connection, and a write while another thread's read is still pending fails with "database
    table is locked" — a limit of the test database, not of the app (CI's PostgreSQL gives every
    thread its own connection, and there nothing is serialized). So here: each request's view
    runs under a lock, the event stream takes it once per poll (it sleeps and streams outside
    it), and a test takes it around its own writes (`with db_lock:`)."""
    if not (connection.vendor == "sqlite" and connection.is_in_memory_db()):
        yield contextlib.nullcontext()
        return
    lock = threading.RLock()
    httpd = live_server.thread.httpd
    app = httpd.get_app()

    def locked_app(environ: dict[str, Any], start_response: Any) -> Any:
        with lock:  # a streaming response is iterated after this returns, outside the lock
            return app(environ, start_response)

    httpd.set_app(locked_app)
    for module, name in (
        (widget_apis, "widget_conversation_state"),
        (widget_streams, "conversation_live_state"),
        (widget_apis, "widget_messages_after"),
        (widget_apis, "widget_turn_in_progress"),
    ):
        monkeypatch.setattr(module, name, _holding(lock, getattr(module, name)))
    try:
        yield lock
    finally:
        httpd.set_app(app)


@pytest.fixture
def demo(live_server, db_lock, settings) -> Client:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.DEMO_PAGE = True  # `/` is the demo shop (the demo/local settings)
    call_command("import_client", str(DEMO_TENANT), stdout=io.StringIO())
    return Client.objects.get(slug="trailhead")


@pytest.fixture
def sam_page(browser: Any, live_server: Any, client_a: Client, monkeypatch: Any) -> Iterator[Any]:
    """A console page signed in as Sam, an agent of `client_a` (the templates sign with the
    first name); its browser context is closed afterwards."""
    from tests.browser.helpers import agent_page

    page = agent_page(browser, live_server, client_a, monkeypatch, first_name="Sam")
    yield page
    page.context.close()


@pytest.fixture
def word_by_word(llm: Any, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """The scripted model streams its replies slowly enough to watch them grow (a first token
    after 0.3 s, then one every 0.04 s), and the widget's event stream polls every 0.1 s."""
    settings.LLM_TIMEOUT = 20.0  # the whole streamed reply takes a few seconds
    monkeypatch.setattr(llm, "first_token_seconds", 0.3)
    monkeypatch.setattr(llm, "token_seconds", 0.04)
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 0.1)


@pytest.fixture(autouse=True)
def _live_server_idle_before_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    """A page may end a test with a request still in flight (the widget shows a sent message
    before the POST returns). Tearing the database down under it deadlocks PostgreSQL's TRUNCATE
    against the request's row locks, so wait until the live server has answered everything."""
    if "live_server" not in request.fixturenames:
        yield
        return
    live_server = request.getfixturevalue("live_server")
    httpd = live_server.thread.httpd
    app = httpd.get_app()
    in_flight = [0]
    guard = threading.Lock()

    def counting_app(environ: dict[str, Any], start_response: Any) -> Any:
        with guard:
            in_flight[0] += 1
        try:
            return app(environ, start_response)  # a streamed body is iterated after this
        finally:
            with guard:
                in_flight[0] -= 1

    httpd.set_app(counting_app)
    try:
        yield
    finally:
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while in_flight[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        httpd.set_app(app)
