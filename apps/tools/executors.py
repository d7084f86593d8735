"""How a tool actually runs: a signed POST to the client's webhook, or a built-in handler.

Executors never raise for tool failures and never touch `ToolExecution`; they return an
`ExecutorOutcome` that `services.tool_execute` records. See DESIGN.md, "Tool webhook protocol".
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction

from apps.clients.models import Client
from apps.core.db import release_connection
from apps.tools.builtins import BUILTIN_HANDLERS, ToolError
from apps.tools.models import ClientTool

logger = logging.getLogger(__name__)

USER_AGENT = "GuideDesk-Webhook/1"
SIGNATURE_HEADER = "X-GuideDesk-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Backoff before retry n (1-based) is min(BASE * 2**(n-1), CAP). Tests set BASE to 0.
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 2.0
# A tool result ends up in prompts and the database; anything bigger is a misbehaving endpoint.
MAX_RESPONSE_BYTES = 1024 * 1024
# The client's error text may be shown to the customer: keep it to a sentence or two.
MAX_ERROR_CHARS = 500

GENERIC_BUILTIN_ERROR = "The tool failed unexpectedly. Please try again later."


@dataclass(frozen=True)
class ExecutorOutcome:
    """What one tool run produced. `attempts` counts HTTP requests (1 for a builtin)."""

    ok: bool
    result: dict[str, Any] | None
    error: str
    attempts: int
    latency_ms: int
    # True when the run ended on a transient failure (timeout, connection error, 5xx, 429)
    # after exhausting the retries: running again later with the same key may succeed.
    retryable_failure: bool = False
    # True when the tool answered and said no (`{"ok": false}` or a builtin's ToolError): a
    # business refusal whose message is meant for the customer, not a technical failure.
    refused: bool = False


def sign_body(body: bytes, secret: str) -> str:
    """The `X-GuideDesk-Signature` value for `body`: `sha256=<hex HMAC-SHA256>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _backoff(retry: int) -> float:
    return float(min(BACKOFF_BASE_SECONDS * 2 ** (retry - 1), BACKOFF_CAP_SECONDS))


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def _error_detail(body: bytes) -> str:
    """The `error` of a protocol-shaped failure body, for HTTP-level failure messages."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return f": {_clip(data['error'])}"
    return ""


class _TransientError(Exception):
    """A failure worth retrying with the same idempotency key."""


class _FinalError(Exception):
    """A failure that retrying cannot fix."""


def _read_limited(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _FinalError(f"Webhook response is larger than {MAX_RESPONSE_BYTES} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_reply(body: bytes) -> tuple[bool, dict[str, Any] | None, str]:
    """Decode a 2xx body into (ok, result, error); raise `_FinalError` when it breaks protocol."""
    try:
        data = json.loads(body)
    except ValueError:
        raise _FinalError("Webhook reply is not valid JSON.") from None
    if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
        raise _FinalError('Webhook reply has no boolean "ok" field.')
    if data["ok"]:
        # An action may have nothing to report: a missing or null result is an empty one.
        result = data.get("result")
        if result is None:
            return True, {}, ""
        if not isinstance(result, dict):
            raise _FinalError('Webhook reply "result" is not a JSON object.')
        return True, result, ""
    error = data.get("error")
    if not isinstance(error, str) or not error.strip():
        return False, None, "The tool reported a failure without a message."
    return False, None, _clip(error)


def _post_once(
    http: httpx.Client, url: str, body: bytes, headers: Mapping[str, str]
) -> tuple[bool, dict[str, Any] | None, str]:
    """One request. Returns the protocol reply or raises `_TransientError` / `_FinalError`."""
    try:
        with http.stream("POST", url, content=body, headers=headers) as response:
            status = response.status_code
            payload = _read_limited(response)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise _FinalError(f"Webhook URL is invalid: {exc}") from None
    except httpx.TimeoutException:
        raise _TransientError("Webhook timed out.") from None
    except httpx.TransportError as exc:
        raise _TransientError(f"Could not reach the webhook ({type(exc).__name__}).") from None
    if status == 429 or status >= 500:
        raise _TransientError(f"Webhook answered HTTP {status}{_error_detail(payload)}.")
    if 300 <= status < 400:
        # Following a redirect would send the signed body somewhere the client never configured.
        raise _FinalError(f"Webhook answered with a redirect (HTTP {status}); not followed.")
    if status >= 400 or status < 200:
        raise _FinalError(f"Webhook answered HTTP {status}{_error_detail(payload)}.")
    return _parse_reply(payload)


def _not_sent(error: str) -> ExecutorOutcome:
    """A call refused before anything went over the network."""
    return ExecutorOutcome(ok=False, result=None, error=error, attempts=0, latency_ms=0)


def destination_refusal(url: str) -> str:
    """Why GuideDesk will not call `url`, or "" when it may. Unless
    TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS is on (local development, tests), a webhook may only
    reach public addresses: a tool configured to point at 127.0.0.1, 10.x, 169.254.169.254 …
    would otherwise let whoever edits a tool probe our own network (SSRF). Every address the
    host resolves to is checked."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return f"{url!r} is not an http(s) URL."
    if settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS:
        return ""
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return f"cannot resolve {parts.hostname!r}."
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global or address.is_multicast:
            return f"{parts.hostname!r} resolves to a non-public address ({address})."
    return ""


def run_webhook(
    *,
    tool: ClientTool,
    params: dict[str, Any],
    conversation_id: str | None,
    idempotency_key: str,
) -> ExecutorOutcome:
    """POST the signed call to the tool's webhook, retrying transient failures with the same
    idempotency key so the client can deduplicate."""
    started = time.monotonic()
    if not tool.webhook_url or not tool.signing_secret:
        # Never send an unsigned call: the client could not tell it from a forgery.
        return _not_sent(f"Tool {tool.name!r} has no webhook URL or signing secret.")
    refusal = destination_refusal(tool.webhook_url)
    if refusal:
        return _not_sent(f"Tool {tool.name!r}: {refusal}")
    payload = {
        "tool": tool.name,
        "params": params,
        "conversation_id": conversation_id,
        "idempotency_key": idempotency_key,
    }
    try:
        # Serialised once: the signature covers exactly the bytes that are sent.
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    except (TypeError, ValueError) as exc:
        return _not_sent(f"Tool params are not JSON-serialisable: {exc}")
    headers = {
        "Content-Type": "application/json",
        IDEMPOTENCY_HEADER: idempotency_key,
        SIGNATURE_HEADER: sign_body(body, tool.signing_secret),
        "User-Agent": USER_AGENT,
    }
    max_attempts = 1 + tool.max_retries
    attempts = 0
    error = ""
    release_connection()  # no database connection is held while the webhook answers
    with httpx.Client(timeout=tool.timeout_seconds, follow_redirects=False) as http:
        while attempts < max_attempts:
            if attempts:
                time.sleep(_backoff(attempts))
            attempts += 1
            try:
                ok, result, error = _post_once(http, tool.webhook_url, body, headers)
            except _FinalError as exc:
                return ExecutorOutcome(
                    ok=False,
                    result=None,
                    error=str(exc),
                    attempts=attempts,
                    latency_ms=_elapsed_ms(started),
                )
            except _TransientError as exc:
                error = str(exc)
                logger.warning(
                    "tool webhook attempt failed",
                    extra={
                        "tool": tool.name,
                        "idempotency_key": idempotency_key,
                        "attempt": attempts,
                        "error": error,
                    },
                )
                continue
            return ExecutorOutcome(
                ok=ok,
                result=result,
                error=error,
                attempts=attempts,
                latency_ms=_elapsed_ms(started),
                refused=not ok,
            )
    return ExecutorOutcome(
        ok=False,
        result=None,
        error=f"{error} Gave up after {attempts} attempt{'s' if attempts != 1 else ''}.",
        attempts=attempts,
        latency_ms=_elapsed_ms(started),
        retryable_failure=True,
    )


def run_builtin(
    *,
    tool: ClientTool,
    client: Client,
    params: dict[str, Any],
    context: Mapping[str, Any],
) -> ExecutorOutcome:
    """Run the tool's built-in handler. `context` is passed to it as extra keyword arguments."""
    started = time.monotonic()
    handler = BUILTIN_HANDLERS.get(tool.builtin_handler)
    if handler is None:
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=f"Tool {tool.name!r} has no built-in handler {tool.builtin_handler!r}.",
            attempts=0,
            latency_ms=0,
        )
    try:
        # A savepoint: a handler that fails half-way leaves no writes behind, and a database
        # error inside it does not poison the caller's transaction.
        with transaction.atomic():
            result = handler(client=client, params=params, **context)
    except ToolError as exc:
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=_clip(str(exc)) or GENERIC_BUILTIN_ERROR,
            attempts=1,
            latency_ms=_elapsed_ms(started),
            refused=True,
        )
    except Exception:
        logger.exception(
            "builtin tool handler crashed",
            extra={"tool": tool.name, "handler": tool.builtin_handler},
        )
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=GENERIC_BUILTIN_ERROR,
            attempts=1,
            latency_ms=_elapsed_ms(started),
        )
    if not isinstance(result, dict):
        logger.error(
            "builtin tool handler returned %s, not a dict",
            type(result).__name__,
            extra={"tool": tool.name, "handler": tool.builtin_handler},
        )
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=GENERIC_BUILTIN_ERROR,
            attempts=1,
            latency_ms=_elapsed_ms(started),
        )
    return ExecutorOutcome(
        ok=True, result=result, error="", attempts=1, latency_ms=_elapsed_ms(started)
    )
