"""Where a webhook may go and how long it may take.

https only in production; every embedded-IPv4 form of a private address is refused; the
connection goes to the address that was checked (a rebinding resolver gets no second say);
`timeout_seconds` is a wall-clock limit per request even against an endpoint that trickles one
byte every 2 s, retries fit in the tool's budget and the turn's deadline, and the execution is
recorded as timed out, never left running."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from apps.core.deadlines import deadline_scope
from apps.tools.executors.webhook import (
    address_is_public,
    attempts_budget,
    destination_refusal,
    resolve_destination,
    run_webhook,
)
from apps.tools.models import ExecutionStatus, FailureKind
from apps.tools.services import tool_execute
from tests.factories import ClientToolFactory

pytestmark = pytest.mark.django_db

SECRET = "s3cret-for-acme"


def call(tool: Any, key: str = "k-1") -> Any:
    return run_webhook(
        tool=tool, params={"order_id": "#W1001"}, conversation_id=None, idempotency_key=key
    )


# --- https ------------------------------------------------------------------------------------


def test_plain_http_is_refused_in_production(client_a, hook, settings):
    settings.TOOL_WEBHOOK_ALLOW_HTTP = False
    tool = ClientToolFactory(client=client_a, webhook_url=hook.url(), signing_secret=SECRET)
    outcome = call(tool)
    assert not outcome.ok and outcome.attempts == 0
    assert "must use https" in outcome.error
    assert hook.requests == []
    settings.TOOL_WEBHOOK_ALLOW_HTTP = True  # development: allowed
    assert call(tool).ok


def test_production_settings_refuse_http():
    from config.settings import base

    assert base.TOOL_WEBHOOK_ALLOW_HTTP is False


# --- every form of a private address --------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.5",
        "169.254.169.254",
        "::1",
        "::127.0.0.1",  # IPv4-compatible (the form that got through)
        "::10.0.0.5",
        "::8.8.8.8",  # IPv4-compatible: deprecated, never a real destination
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:169.254.169.254",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:5::1",  # 6to4 of 10.0.0.5
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
        "fc00::1",
        "fe80::1",
        "ff02::1",
        "0.0.0.0",
    ],
)
def test_non_public_addresses_in_every_form_are_refused(address):
    assert not address_is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    assert address_is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "http://[::127.0.0.1]:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://[::ffff:7f00:1]:9/hook",
        "http://[2002:7f00:1::]:9/hook",
        "http://[64:ff9b::7f00:1]:9/hook",
    ],
)
def test_a_webhook_to_an_embedded_private_address_is_refused(client_a, hook, settings, url):
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    tool = ClientToolFactory(client=client_a, webhook_url=url, signing_secret=SECRET)
    outcome = call(tool)
    assert not outcome.ok and outcome.attempts == 0
    assert "non-public address" in outcome.error
    assert "non-public" in destination_refusal(url)


# --- DNS pinning ---------------------------------------------------------------------------------


@pytest.fixture
def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A resolver for `tool.rebind.test` that answers 127.0.0.1 the first time and an
    unreachable address after that (what a rebinding attacker's DNS does). Other names resolve
    as usual. Yields the answers given."""
    real = socket.getaddrinfo
    answers: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "tool.rebind.test":
            return real(host, port, *args, **kwargs)
        address = "127.0.0.1" if not answers else "192.0.2.1"  # TEST-NET-1: goes nowhere
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


def test_the_call_goes_to_the_checked_address_with_the_hostname_kept(client_a, hook, rebinding_dns):
    port = hook.url().split(":")[2].split("/")[0]
    url = f"http://tool.rebind.test:{port}/hook"
    tool = ClientToolFactory(
        client=client_a, webhook_url=url, signing_secret=SECRET, timeout_seconds=2
    )
    outcome = call(tool)
    assert outcome.ok, outcome.error
    assert rebinding_dns == ["127.0.0.1"]  # resolved once; the connection used that answer
    [request] = hook.requests
    assert request.headers["host"] == f"tool.rebind.test:{port}"


def test_a_rebinding_answer_after_the_check_is_never_used(client_a, hook, settings, monkeypatch):
    """The attack: the check resolves a public address, the connection would resolve again and
    get 127.0.0.1. Pinned, the request goes to the checked address and never reaches the
    internal server."""
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    real = socket.getaddrinfo
    answers: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "tool.rebind.test":
            return real(host, port, *args, **kwargs)
        address = "8.8.8.8" if not answers else "127.0.0.1"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    port = hook.url().split(":")[2].split("/")[0]
    tool = ClientToolFactory(
        client=client_a,
        webhook_url=f"http://tool.rebind.test:{port}/hook",
        signing_secret=SECRET,
        timeout_seconds=1,
        max_retries=0,
    )
    outcome = call(tool)
    assert not outcome.ok  # the public address does not answer in a test
    assert answers == ["8.8.8.8"]
    assert hook.requests == []  # the internal server was never reached


def test_resolve_destination_returns_the_checked_address(settings):
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    assert resolve_destination("http://127.0.0.1:9/x") == ("127.0.0.1", "")
    assert resolve_destination("http://[::1]:9/x") == ("::1", "")
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    address, refusal = resolve_destination("http://127.0.0.1:9/x")
    assert address is None and "non-public" in refusal


# --- wall-clock limits against a trickling endpoint ---------------------------------------------


@pytest.fixture
def trickling_url() -> Iterator[tuple[str, list[bytes]]]:
    """An endpoint that sends its headers at once and then one body byte every 2 s — each read
    succeeds well inside any per-read timeout. Yields its URL and the requests it received."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    received: list[bytes] = []

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            request = b""
            try:
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    request += chunk
                received.append(request)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n"
                )
                for _ in range(1000):
                    if stop.wait(2.0):
                        return
                    conn.sendall(b" ")
            except OSError:
                return  # the client hung up: what a limit does

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", received
    stop.set()
    thread.join(2)
    listener.close()


def _idempotency_keys(received: list[bytes]) -> list[str]:
    keys = []
    for request in received:
        for line in request.split(b"\r\n"):
            if line.lower().startswith(b"webhook-id:"):
                keys.append(line.split(b":", 1)[1].strip().decode())
    return keys


def test_a_trickling_webhook_is_cut_at_its_timeout_and_recorded_as_timed_out(
    client_a, trickling_url
):
    url, received = trickling_url
    tool = ClientToolFactory(
        client=client_a, webhook_url=url, signing_secret=SECRET, timeout_seconds=2.5, max_retries=1
    )
    started = time.monotonic()
    execution = tool_execute(client=client_a, tool=tool, params={}, idempotency_key="pa-trickle")
    elapsed = time.monotonic() - started
    # two attempts of 2.5 s each plus the backoff; per-read timeouts would take 2000 s
    assert elapsed < attempts_budget(tool) + 2.0
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.FAILED  # finished, never left running
    assert execution.failure_kind == FailureKind.TIMED_OUT
    assert execution.attempts == 2
    assert "timed out" in execution.error
    assert _idempotency_keys(received) == ["pa-trickle", "pa-trickle"]  # same key on the retry


def test_retries_stop_at_the_turn_deadline(client_a, trickling_url):
    url, _received = trickling_url
    tool = ClientToolFactory(
        client=client_a, webhook_url=url, signing_secret=SECRET, timeout_seconds=5, max_retries=5
    )
    started = time.monotonic()
    with deadline_scope(3.0):
        outcome = call(tool)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0 + 2.0  # the turn's deadline, not 6 attempts × 5 s
    assert not outcome.ok and outcome.timed_out and outcome.retryable_failure
    assert 1 <= outcome.attempts < 6


def test_no_attempt_starts_when_the_turn_has_no_time_left(client_a, hook):
    tool = ClientToolFactory(client=client_a, webhook_url=hook.url(), signing_secret=SECRET)
    with deadline_scope(0.01):
        time.sleep(0.05)
        outcome = call(tool)
    assert not outcome.ok and outcome.timed_out
    assert hook.requests == []


def test_a_retry_tries_the_next_checked_address(client_a, hook, monkeypatch):
    """A host with two addresses whose first does not answer from here (a dual-stack host
    without an IPv6 route, say): the retry connects to the second checked address."""
    real = socket.getaddrinfo
    port = int(hook.url().split(":")[2].split("/")[0])

    def getaddrinfo(host: Any, p: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "tool.dual.test":
            return real(host, p, *args, **kwargs)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", int(p))),  # refused
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(p))),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    tool = ClientToolFactory(
        client=client_a,
        webhook_url=f"http://tool.dual.test:{port}/hook",
        signing_secret=SECRET,
        max_retries=1,
    )
    outcome = call(tool)
    assert outcome.ok, outcome.error
    assert outcome.attempts == 2
    [request] = hook.requests
    assert request.headers["host"] == f"tool.dual.test:{port}"
