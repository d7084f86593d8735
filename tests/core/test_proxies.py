"""Behind a reverse proxy every limit must stay per visitor. One setting
(`TRUSTED_PROXY_COUNT`) tells DRF's throttles (`NUM_PROXIES`) and allauth's login limits
(`ALLAUTH_TRUSTED_PROXY_COUNT`) how many of our proxies append to `X-Forwarded-For`; the rates
and login limits come from the environment too.

The in-process tests send the header as a proxy would (REMOTE_ADDR = the proxy); the last one runs
a tiny real proxy in front of the live server and connects to it from different loopback
addresses."""

from __future__ import annotations

import http.client
import json
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings as django_settings
from django.test import Client as DjangoClient

from apps.clients.models import Client
from tests.core.helpers import run_python
from tests.factories import ClientFactory, UserFactory
from tests.widget.conftest import API, Widget

PROXY = "10.0.0.1"  # the reverse proxy's address, as the application sees it
PASSWORD = "pw-for-tests-123"


def behind_one_proxy(settings: Any, **rates: str) -> None:
    """What TRUSTED_PROXY_COUNT=1 (and THROTTLE_WIDGET_*) set, applied to the running process."""
    rest: dict[str, Any] = dict(django_settings.REST_FRAMEWORK)
    rest["NUM_PROXIES"] = 1
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], **rates}
    settings.REST_FRAMEWORK = rest
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 1


def start(widget: Widget, visitor: str, spoofed: str | None = None) -> int:
    forwarded = f"{spoofed}, {visitor}" if spoofed else visitor
    response = widget.http.post(
        f"{API}conversations",
        {},
        format="json",
        headers=widget.headers(**{"X-Forwarded-For": forwarded}),
        REMOTE_ADDR=PROXY,
    )
    return response.status_code


def failed_login(http: DjangoClient, *, remote: str, forwarded: str | None = None) -> str:
    extra = {"REMOTE_ADDR": remote}
    if forwarded:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    response = http.post(
        "/accounts/login/",
        {"login": f"nobody-{uuid.uuid4().hex[:8]}@example.com", "password": "wrong"},
        **extra,
    )
    assert response.status_code == 200
    return response.content.decode()


# ------------------------------------------------------------------ the environment settings


def settings_from_environment(**env: str) -> dict[str, Any]:
    """Load config.settings.test in a fresh interpreter with these environment variables."""
    code = (
        "import json, django; from django.conf import settings as s; django.setup(); "
        "print(json.dumps({'num_proxies': s.REST_FRAMEWORK['NUM_PROXIES'], "
        "'allauth': s.ALLAUTH_TRUSTED_PROXY_COUNT, "
        "'rates': s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'], "
        "'login': s.ACCOUNT_RATE_LIMITS}))"
    )
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("THROTTLE_", "ACCOUNT_RATE_LIMIT_", "TRUSTED_PROXY_COUNT"))
    }
    environment |= {"DJANGO_SETTINGS_MODULE": "config.settings.test", **env}
    done = run_python(code, environment, timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_proxy_count_rates_and_login_limits_come_from_the_environment():
    defaults = settings_from_environment()
    assert defaults["num_proxies"] == 0 and defaults["allauth"] == 0
    assert defaults["rates"] == {
        "widget_ip": "120/min",
        "widget_key": "3000/min",
        "widget_conversations": "10/min",
        "widget_messages": "20/min",
        "widget_tokens": "200000/hour",
        "widget_address_tokens": "2000000/hour",
        "widget_ratings": "20/hour",
    }
    assert defaults["login"] == {
        "login": "30/m/ip",
        "login_failed": "10/m/ip,5/5m/key",
        "reset_password": "20/m/ip,5/m/key",
    }

    widget_rates = {
        "THROTTLE_WIDGET_IP": "7/min",
        "THROTTLE_WIDGET_KEY": "7000/min",
        "THROTTLE_WIDGET_CONVERSATIONS": "3/min",
        "THROTTLE_WIDGET_MESSAGES": "4/min",
        "THROTTLE_WIDGET_TOKENS": "5000/hour",
        "THROTTLE_WIDGET_ADDRESS_TOKENS": "50000/hour",
        "THROTTLE_WIDGET_RATINGS": "6/hour",
    }
    configured = settings_from_environment(
        TRUSTED_PROXY_COUNT="2",
        **widget_rates,
        ACCOUNT_RATE_LIMIT_LOGIN="9/m/ip",
        ACCOUNT_RATE_LIMIT_LOGIN_FAILED="3/m/ip,2/5m/key",
        ACCOUNT_RATE_LIMIT_RESET_PASSWORD="1/m/ip",
    )
    # one variable feeds both DRF and allauth
    assert configured["num_proxies"] == 2 and configured["allauth"] == 2
    # THROTTLE_WIDGET_<NAME> sets the rate `widget_<name>`
    assert configured["rates"] == {
        variable.removeprefix("THROTTLE_").lower(): rate for variable, rate in widget_rates.items()
    }
    assert configured["login"] == {
        "login": "9/m/ip",
        "login_failed": "3/m/ip,2/5m/key",
        "reset_password": "1/m/ip",
    }


# ------------------------------------------------------------------ through a proxy (header)


@pytest.mark.django_db
def test_behind_a_proxy_one_visitor_opening_chats_does_not_block_the_others(settings):
    behind_one_proxy(settings, widget_conversations="10/min")
    widget = Widget(ClientFactory(slug="shop", name="Shop"))
    for _ in range(10):
        assert start(widget, "203.0.113.7") == 201
    assert start(widget, "203.0.113.7") == 429
    # a made-up address in front of the one our proxy saw changes nothing
    assert start(widget, "203.0.113.7", spoofed="192.0.2.99") == 429
    assert start(widget, "203.0.113.8") == 201  # everybody else still chats


@pytest.mark.django_db
def test_without_a_trusted_proxy_the_header_is_ignored(settings):
    rest: dict[str, Any] = dict(django_settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], "widget_ip": "2/min"}
    settings.REST_FRAMEWORK = rest  # NUM_PROXIES stays 0, the default
    widget = Widget(ClientFactory(slug="shop", name="Shop"))
    assert start(widget, "203.0.113.7") == 201
    assert start(widget, "203.0.113.8") == 201
    assert start(widget, "203.0.113.9") == 429  # all of them are the proxy's address


@pytest.mark.django_db
def test_behind_a_proxy_failed_logins_lock_out_only_that_address(settings):
    behind_one_proxy(settings)
    staff = UserFactory(email="agent@shop.example")
    attacker = DjangoClient()
    for _ in range(10):
        assert "Too many failed" not in failed_login(
            attacker, remote=PROXY, forwarded="203.0.113.66"
        )
    assert "Too many failed login attempts" in failed_login(
        attacker, remote=PROXY, forwarded="203.0.113.66"
    )
    # spoofing another address in front of the proxy's entry does not help the attacker
    assert "Too many failed login attempts" in failed_login(
        attacker, remote=PROXY, forwarded="198.51.100.1, 203.0.113.66"
    )
    # a staff member elsewhere signs in as usual
    response = DjangoClient().post(
        "/accounts/login/",
        {"login": staff.email, "password": PASSWORD},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR="203.0.113.10",
    )
    assert response.status_code == 302, response.content.decode()[:500]


@pytest.mark.django_db
def test_login_limits_come_from_the_settings(settings):
    settings.ACCOUNT_RATE_LIMITS = {**django_settings.ACCOUNT_RATE_LIMITS, "login_failed": "2/m/ip"}
    http = DjangoClient()
    assert "Too many failed" not in failed_login(http, remote="203.0.113.5")
    assert "Too many failed" not in failed_login(http, remote="203.0.113.5")
    assert "Too many failed login attempts" in failed_login(http, remote="203.0.113.5")


# ------------------------------------------------------------------ through a real proxy


class ReverseProxy(ThreadingHTTPServer):
    """A minimal reverse proxy: forwards every request to `upstream` and appends the address it
    was connected from to X-Forwarded-For, as nginx's `$proxy_add_x_forwarded_for` does."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(BaseHTTPRequestHandler):
    server: ReverseProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() != "x-forwarded-for"}
        previous = self.headers.get("X-Forwarded-For")
        peer = self.client_address[0]
        headers["X-Forwarded-For"] = f"{previous}, {peer}" if previous else peer
        upstream = http.client.HTTPConnection(
            self.server.upstream.hostname, self.server.upstream.port, timeout=30
        )
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            reply = upstream.getresponse()
            payload = reply.read()
        finally:
            upstream.close()
        self.send_response(reply.status)
        for name, value in reply.getheaders():
            if name.lower() not in {"content-length", "connection", "transfer-encoding"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _forward


@pytest.fixture
def proxy(live_server: Any) -> Iterator[str]:
    server = ReverseProxy(live_server.url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def visitor(address: str, base_url: str) -> httpx.Client:
    """An HTTP client whose connections come from `address` (any 127.x.y.z is this machine)."""
    return httpx.Client(
        base_url=base_url,
        transport=httpx.HTTPTransport(local_address=address),
        timeout=30,
        follow_redirects=False,
    )


def sign_in(http: httpx.Client, email: str, password: str) -> httpx.Response:
    page = http.get("/accounts/login/")
    assert page.status_code == 200
    return http.post(
        "/accounts/login/",
        data={
            "login": email,
            "password": password,
            "csrfmiddlewaretoken": http.cookies["csrftoken"],
        },
        headers={"Referer": f"{http.base_url}accounts/login/"},
    )


@pytest.mark.django_db(transaction=True)
def test_through_a_real_proxy_limits_stay_per_visitor(proxy, settings):
    behind_one_proxy(settings, widget_conversations="10/min")
    shop: Client = ClientFactory.create(slug="shop", name="Shop")
    staff = UserFactory(email="agent@shop.example")
    headers = {"X-Widget-Key": shop.widget_key, "Origin": shop.allowed_origins[0]}

    with visitor("127.0.0.2", proxy) as one, visitor("127.0.0.3", proxy) as other:
        # one visitor opens ten chats (and lies about their address); the next is refused …
        for _ in range(10):
            started = one.post(
                f"{API}conversations",
                json={},
                headers={**headers, "X-Forwarded-For": "192.0.2.1"},
            )
            assert started.status_code == 201, started.text
        assert one.post(f"{API}conversations", json={}, headers=headers).status_code == 429
        # … and nobody else is
        assert other.post(f"{API}conversations", json={}, headers=headers).status_code == 201

        # ten failed sign-ins from one address lock that address out …
        for n in range(10):
            assert "Too many failed" not in sign_in(one, f"x{n}@example.com", "wrong").text
        assert "Too many failed login attempts" in sign_in(one, staff.email, PASSWORD).text
        # … while the staff member, elsewhere, signs in
        signed_in = sign_in(other, staff.email, PASSWORD)
        assert signed_in.status_code == 302, signed_in.text[:500]
