"""The widget as shipped: production settings, the Procfile's `release` (migrate +
collectstatic) and `web` commands (gunicorn managing uvicorn workers, ASGI), static files from
WhiteNoise, embedded on a shop page of another origin, chatting in real headless Chromium with
the fake LLM behind it."""

from __future__ import annotations

import contextlib
import gzip
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from playwright.sync_api import expect

from apps.conversations.models import Conversation
from apps.provisioning.files import load_tenant_file
from devtools.fake_llm import FakeLLMServer, RecordedRequest
from tests.browser.helpers import shot
from tests.conftest import DEMO_TENANT, ROOT
from tests.support import procfile
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.support.shop import assess

# Each test deploys the Procfile (release: migrate + collectstatic; gunicorn boot): more than
# the suite's 120 s per test on a busy machine.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

REPLY = "Orders placed before noon MT ship the same day."
# Production needs a broker (turns run in the Procfile's `worker`): the test's Redis.


class _ShopHandler(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Deployment:
    url: str
    widget_key: str
    shop_url: str
    env: dict[str, str]


def _database_url(tmp_path: Path) -> str:
    """The server shares the test database on PostgreSQL; on SQLite (in-memory in tests, which
    another process cannot open) it gets its own file, migrated by the release command."""
    if connection.vendor == "postgresql":
        s = connection.settings_dict
        auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    return f"sqlite:///{tmp_path / 'production.sqlite3'}"


@pytest.fixture
def deployment(transactional_db, tmp_path: Path, llm: FakeLLMServer) -> Iterator[Deployment]:
    with _deployed(tmp_path, llm) as deployed:
        yield deployed


@contextlib.contextmanager
def _deployed(tmp_path: Path, llm: FakeLLMServer, **extra_env: str) -> Iterator[Deployment]:
    if not REDIS_URL.startswith("redis://"):
        pytest.skip("production needs a broker: CELERY_BROKER_URL=redis://…")
    port = procfile.free_port()
    env = procfile.process_env(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "SECRET_KEY": "production-browser-test-secret-key-0123456789-abcdefghij",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": _database_url(tmp_path),
            "STATIC_ROOT": str(tmp_path / "static"),
            "SECURE_SSL_REDIRECT": "False",
            "SECURE_HSTS_SECONDS": "0",
            "EMAIL_URL": "smtp://127.0.0.1:1",
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": llm.base_url,
            "LLM_MODEL": "gpt-4o-mini",
            "LLM_MAX_RETRIES": "0",
            "WEB_CONCURRENCY": "1",
            "CELERY_BROKER_URL": REDIS_URL,
            "CELERY_CONCURRENCY": "4",
            # The suite's other workers share these cores at the web's priority, which no
            # production box has: the shipped niceness is tests/core/test_process_priorities.py's.
            "WORKER_NICENESS": "0",
            "PORT": str(port),
            **extra_env,
        }
    )
    procfile.run_release(env)

    # The tenant's shop lives on another origin, which the tenant allows.
    shop = ThreadingHTTPServer(("127.0.0.1", 0), _ShopHandler)
    shop_url = f"http://127.0.0.1:{shop.server_address[1]}"
    tenant = load_tenant_file(DEMO_TENANT)
    for client in tenant["clients"]:
        client["widget"]["allowed_origins"] = [shop_url]
    tenant_file = tmp_path / "tenant.json"
    tenant_file.write_text(json.dumps(tenant))
    imported = subprocess.run(
        [str(Path(procfile.sys.executable)), "manage.py", "import_client", str(tenant_file)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    widget_key = json.loads(imported.stdout)["clients"][0]["widget_key"]

    url = f"http://127.0.0.1:{port}"
    _ShopHandler.page = (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>A shop</title></head>"
        "<body><h1>A shop on another origin</h1>"
        f'<script src="{url}/static/widget.js" data-widget-key="{widget_key}" async></script>'
        "</body></html>"
    ).encode()
    threading.Thread(target=shop.serve_forever, daemon=True).start()

    log = tmp_path / "web.log"
    web = procfile.start("web", env, log)
    worker_log = tmp_path / "worker.log"
    worker = procfile.start("worker", env, worker_log)
    try:
        procfile.wait_for_http(url + "/healthz", web, log)
        yield Deployment(url=url, widget_key=widget_key, shop_url=shop_url, env=env)
    finally:
        procfile.stop(web)
        procfile.stop(worker)
        sys.stderr.write(log.read_text()[-6000:])  # shown when the test fails
        sys.stderr.write(worker_log.read_text()[-3000:])
        shop.shutdown()
        shop.server_close()


def _get(url: str, **headers: str) -> Any:
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10)


def _static_files_are_served_compressed_and_cached(deployment: Deployment) -> None:
    # The loader keeps its fixed name (tenants embed it); it is cached for a while only.
    with _get(deployment.url + "/static/widget.js", **{"Accept-Encoding": "gzip"}) as loader:
        assert loader.status == 200
        assert loader.headers["Content-Encoding"] == "gzip"
        assert "max-age=3600" in loader.headers["Cache-Control"]
        assert b"data-widget-key" in gzip.decompress(loader.read())
    # The frame links its script and styles by content-hashed name, cached for good.
    with _get(f"{deployment.url}/widget/frame/?key={deployment.widget_key}") as frame:
        html = frame.read().decode()
    hashed = [part.split('"')[0] for part in html.split('src="')[1:] + html.split('href="')[1:]]
    hashed = [h for h in hashed if h.startswith("/static/widget/frame.")]
    assert len(hashed) == 2, html
    for path in hashed:
        assert path.count(".") == 2  # frame.<hash>.js / frame.<hash>.css
        with _get(deployment.url + path) as asset:
            assert asset.status == 200
            assert "immutable" in asset.headers["Cache-Control"]
            assert "max-age=315360000" in asset.headers["Cache-Control"]
    with _get(deployment.url + "/healthz") as health:
        assert health.headers["Server"] == "uvicorn"  # the ASGI server the Procfile runs


def test_the_widget_loads_and_chats_under_production_settings(
    browser: Any, deployment: Deployment, llm: FakeLLMServer, screenshots: Path
):
    # (One test: setting the deployment up — collectstatic, migrate, gunicorn — is the slow part.)
    _static_files_are_served_compressed_and_cached(deployment)

    def answer(request: RecordedRequest) -> dict[str, Any]:
        return assess(response=REPLY)

    llm.fallback(answer)
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    failed: list[str] = []
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    page.goto(deployment.shop_url + "/")
    launcher = page.locator("#guidedesk-launcher")
    expect(launcher).to_have_accessible_name("Chat with us")
    launcher.click()
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text("Hi! I'm Trailhead's assistant.")).to_be_visible()
    box = frame.get_by_label("Your message")
    expect(box).to_be_focused()  # the frame's script has loaded and taken over
    box.fill("When do you ship?")
    box.press("Enter")
    # A fresh worker imports the API on its first request: allow the first answer some time.
    expect(frame.locator("li.gd-msg--user").last).to_contain_text("When do you ship?")
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text(REPLY)
    expect(frame.locator("#gd-typing")).to_be_hidden()
    shot(page, screenshots, "widget-production.png")
    assert llm.calls(), "the reply came from the (fake) model through the production server"
    assert problems == []
    assert failed == []
    page.close()


STAFF_EMAIL = "agent@trailhead.example"
STAFF_PASSWORD = "console-doorbell-password-123"
_CREATE_AGENT = f"""
from apps.accounts.models import Membership, Role, User
from apps.clients.models import Client
user = User.objects.create_user(email={STAFF_EMAIL!r}, password={STAFF_PASSWORD!r})
Membership.objects.create(user=user, client=Client.objects.get(), role=Role.AGENT)
"""


def _chat(page: Any, text: str, reply: str) -> None:
    frame = page.frame_locator("#guidedesk-panel iframe")
    box = frame.get_by_label("Your message")
    expect(box).to_be_focused()
    box.fill(text)
    box.press("Enter")
    expect(frame.locator("li.gd-msg--user").last).to_contain_text(text)
    expect(frame.locator("li.gd-msg--assistant[data-seq]").last).to_contain_text(reply)


@NEEDS_REDIS
def test_the_console_follows_a_conversation_live_through_its_doorbell(
    browser: Any, transactional_db: Any, tmp_path: Path, llm: FakeLLMServer, screenshots: Path
):
    """Over ASGI with Redis the console's conversation page opens ONE doorbell stream, keeps it
    open, and shows the customer's next message and the reply without waiting for a poll
    (while the doorbell is open the page polls only once a minute)."""
    if connection.vendor != "postgresql":
        pytest.skip("the production server shares the test database on PostgreSQL only")
    llm.fallback(lambda request: assess(response=REPLY))
    with _deployed(tmp_path, llm, REDIS_URL=REDIS_URL) as deployment:
        subprocess.run(
            [procfile.sys.executable, "manage.py", "shell", "-c", _CREATE_AGENT],
            cwd=ROOT,
            env=deployment.env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        shop = browser.new_page(viewport={"width": 1280, "height": 860})
        shop.goto(deployment.shop_url + "/")
        shop.locator("#guidedesk-launcher").click()
        _chat(shop, "When do you ship?", REPLY)
        public_id = (
            Conversation.objects.unscoped("test checks the database directly").get().public_id
        )

        context = browser.new_context()
        console = context.new_page()
        streams: list[tuple[int, str]] = []
        console.on(
            "response",
            lambda r: (
                streams.append((r.status, r.headers.get("content-type", "")))
                if r.url.split("?")[0].endswith("/events")
                else None
            ),
        )
        console.goto(f"{deployment.url}/console/conversations/{public_id}/")
        console.fill("input[name=login]", STAFF_EMAIL)
        console.fill("input[name=password]", STAFF_PASSWORD)
        # The conversation page opens its doorbell (and catches up once) as it loads.
        with console.expect_response(lambda r: r.url.split("?")[0].endswith("/events")):
            console.locator("form [type=submit]").first.click()
            console.wait_for_selector("#gd-conversation")
        visible = console.locator("li.gd-msg:not(.gd-internal)")
        expect(visible.filter(has_text=REPLY)).to_have_count(1)
        assert streams and streams[0][0] == 200
        assert streams[0][1].startswith("text/event-stream")

        _chat(shop, "Do you ship to Canada?", REPLY)
        # Seen well before the once-a-minute safety-net poll: the doorbell rang.
        expect(visible.filter(has_text="Do you ship to Canada?")).to_have_count(1)
        expect(visible.filter(has_text=REPLY)).to_have_count(2)
        shot(console, screenshots, "console-doorbell.png")
        assert len(streams) == 1, streams  # one doorbell, never dropped and reopened
        context.close()
        shop.close()
