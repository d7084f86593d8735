"""The webhook executor: a signed POST to the client's HTTPS endpoint (docs/webhooks.md).

- Signed per the Standard Webhooks specification with the maintained `standardwebhooks` package
  (`webhook-id` = the idempotency key, `webhook-timestamp`, `webhook-signature: v1,<base64>`,
  one signature per active secret during a rotation); the legacy `X-GuideDesk-Signature` is sent
  alongside while `TOOL_WEBHOOK_LEGACY_SIGNATURE` is on.
- `timeout_seconds` is a wall-clock limit per request (connect, TLS, every read), enforced by
  `apps.platform.http` even against an endpoint that trickles bytes; all attempts together fit in
  the tool's budget and in the turn's deadline (`apps.core.deadlines`).
- The destination is resolved once, checked (public addresses only, embedded IPv4 forms
  included) and the connection pinned to the checked address, so DNS rebinding cannot slip in
  between the check and the call; Host, SNI and certificate checks keep the hostname. https is
  required unless `TOOL_WEBHOOK_ALLOW_HTTP` is on (development, tests).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx2
from django.conf import settings
from django.utils.translation import gettext_noop
from standardwebhooks.webhooks import Webhook

from apps.core import deadlines
from apps.platform.db import release_connection
from apps.platform.http import CONNECT_TO, wall_clock_client
from apps.platform.netguard import address_is_public as address_is_public  # re-exported
from apps.platform.netguard import checked_addresses
from apps.tools.executors import TIMEOUT_SETTING, Executor, ExecutorOutcome, clip_error, elapsed_ms
from apps.tools.wording import ERROR_CODE_RE

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.tools.models import ClientTool, ToolExecution

logger = logging.getLogger(__name__)

USER_AGENT = "GuideDesk-Webhook/1"
SIGNATURE_HEADER = "X-GuideDesk-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Backoff before retry n (1-based) is min(BASE * 2**(n-1), CAP). Tests set BASE to 0.
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 2.0
# A tool result ends up in prompts and the database; anything bigger is a misbehaving endpoint.
MAX_RESPONSE_BYTES = 1024 * 1024


def sign_body(body: bytes, secret: str) -> str:
    """The `X-GuideDesk-Signature` value for `body`: `sha256=<hex HMAC-SHA256>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _backoff(retry: int) -> float:
    return float(min(BACKOFF_BASE_SECONDS * 2 ** (retry - 1), BACKOFF_CAP_SECONDS))


def _error_detail(body: bytes) -> str:
    """The `error` of a protocol-shaped failure body, for HTTP-level failure messages."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return f": {clip_error(data['error'])}"
    return ""


class _TransientError(Exception):
    """A failure worth retrying with the same idempotency key."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class _FinalError(Exception):
    """A failure that retrying cannot fix."""


def _read_limited(response: httpx2.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _FinalError(f"Webhook response is larger than {MAX_RESPONSE_BYTES} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_reply(body: bytes) -> tuple[bool, dict[str, Any] | None, str, str]:
    """Decode a 2xx body into (ok, result, error, error code); raise `_FinalError` when it
    breaks protocol. An unknown or malformed `code` is ignored (the error is worded as one
    without a code)."""
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
            return True, {}, "", ""
        if not isinstance(result, dict):
            raise _FinalError('Webhook reply "result" is not a JSON object.')
        return True, result, "", ""
    code = data.get("code")
    code = code if isinstance(code, str) and ERROR_CODE_RE.match(code) else ""
    error = data.get("error")
    if not isinstance(error, str) or not error.strip():
        return False, None, "The tool reported a failure without a message.", code
    return False, None, clip_error(error), code


def _post_once(
    http: httpx2.Client,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    extensions: dict[str, Any],
) -> tuple[bool, dict[str, Any] | None, str, str]:
    """One request. Returns the protocol reply or raises `_TransientError` / `_FinalError`."""
    try:
        request = http.build_request(
            "POST", url, content=body, headers=headers, extensions=extensions
        )
        response = http.send(request, stream=True)
        try:
            status = response.status_code
            payload = _read_limited(response)
        finally:
            response.close()
    except (httpx2.UnsupportedProtocol, httpx2.InvalidURL) as exc:
        raise _FinalError(f"Webhook URL is invalid: {exc}") from None
    except httpx2.TimeoutException:
        raise _TransientError("Webhook timed out.", timed_out=True) from None
    except httpx2.TransportError as exc:
        raise _TransientError(f"Could not reach the webhook ({type(exc).__name__}).") from None
    if status == 429 or status >= 500:
        raise _TransientError(f"Webhook answered HTTP {status}{_error_detail(payload)}.")
    if 300 <= status < 400:
        # Following a redirect would send the signed body somewhere the client never configured.
        raise _FinalError(f"Webhook answered with a redirect (HTTP {status}); not followed.")
    if status >= 400 or status < 200:
        raise _FinalError(f"Webhook answered HTTP {status}{_error_detail(payload)}.")
    return _parse_reply(payload)


# --- signing (Standard Webhooks) ---------------------------------------------------------------

SECRET_PREFIX = "whsec_"  # noqa: S105 (the Standard Webhooks prefix, not a secret)


def generate_secret() -> str:
    """A new signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a secret: the base64 part of a `whsec_` secret, or the secret's own
    UTF-8 bytes for a secret imported in another form (what `standardwebhooks` does when given
    bytes, so tenants verify with `Webhook(secret.encode())`)."""
    if secret.startswith(SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except ValueError:
            pass  # not base64 after all: used as typed
    return secret.encode()


def secret_problem(secret: str) -> str:
    """Why `secret` cannot sign webhooks, or ""."""
    if len(secret) < 8:
        return "The signing secret must be at least 8 characters."
    if secret.startswith(SECRET_PREFIX) and len(secret_key(secret)) < 16:
        return "A whsec_ secret must hold at least 16 bytes of base64 after the prefix."
    return ""


def active_secrets(tool: ClientTool) -> list[str]:
    """The secrets requests are signed with: the signing secret, plus the rotation secret
    while a rotation is under way."""
    return [s for s in (tool.signing_secret, tool.rotation_secret) if s]


def sign_request(
    *, body: bytes, message_id: str, timestamp: datetime, secrets_: list[str]
) -> dict[str, str]:
    """The Standard Webhooks headers for one attempt: `webhook-id`, `webhook-timestamp` and a
    space-separated `webhook-signature` with one `v1,<base64>` per active secret."""
    text = body.decode()
    signatures = [
        Webhook(secret_key(secret)).sign(msg_id=message_id, timestamp=timestamp, data=text)
        for secret in secrets_
    ]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


# --- where the request goes ---------------------------------------------------------------------


def resolve_destination(url: str) -> tuple[str | None, str]:
    """(the address to connect to, why GuideDesk will not call `url` or ""): the first of
    `resolve_addresses`."""
    addresses, refusal = resolve_addresses(url)
    return (addresses[0] if addresses else None), refusal


def resolve_addresses(url: str) -> tuple[list[str], str]:
    """(the checked addresses, in the resolver's order, why GuideDesk will not call `url` or "").

    The host is resolved once; unless TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS is on (development,
    tests) every address it resolves to must be public, so a tool pointed at 127.0.0.1,
    10.x, 169.254.169.254, [::127.0.0.1] … cannot probe our own network (SSRF). The returned
    addresses are the only ones the request may connect to (pinned), so DNS rebinding between
    this check and the call cannot send it elsewhere. https is required unless
    TOOL_WEBHOOK_ALLOW_HTTP is on."""
    return checked_addresses(
        url,
        allow_private=settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS,
        allow_http=settings.TOOL_WEBHOOK_ALLOW_HTTP,
        http_refusal="webhooks must use https (plain http is refused in production).",
    )


def destination_refusal(url: str) -> str:
    """Why GuideDesk will not call `url`, or "" when it may (see `resolve_destination`)."""
    return resolve_destination(url)[1]


# --- the call -----------------------------------------------------------------------------------


def attempts_budget(tool: ClientTool) -> float:
    """The most all attempts of one call may take: every attempt its full timeout, plus the
    backoffs between them. The turn's deadline, when sooner, wins."""
    retries = tool.max_retries
    return tool.timeout_seconds * (1 + retries) + sum(_backoff(n) for n in range(1, retries + 1))


def _request_body(
    *,
    tool: ClientTool,
    params: dict[str, Any],
    conversation_id: str | None,
    idempotency_key: str,
    customer: dict[str, Any] | None,
) -> bytes:
    """The call's JSON body, serialised once: the signatures cover exactly the bytes that are
    sent. Raises TypeError or ValueError when the params are not JSON-serialisable."""
    payload = {
        "tool": tool.name,
        "params": params,
        "conversation_id": conversation_id,
        "idempotency_key": idempotency_key,
    }
    if customer is not None:
        # The verified customer (docs/webhooks.md): inside the signed body, so the client's
        # backend can check that the order (or account) it is asked about is theirs.
        payload["customer"] = customer
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def _base_headers(tool: ClientTool, body: bytes, idempotency_key: str) -> dict[str, str]:
    """The headers every attempt sends (the per-attempt signature is added to them)."""
    headers = {
        "Content-Type": "application/json",
        IDEMPOTENCY_HEADER: idempotency_key,
        "User-Agent": USER_AGENT,
    }
    if settings.TOOL_WEBHOOK_LEGACY_SIGNATURE:
        headers[SIGNATURE_HEADER] = sign_body(body, tool.signing_secret)
    return headers


@dataclass
class _Call:
    """One webhook call: what every attempt sends, and how its attempts went so far."""

    tool: ClientTool
    body: bytes
    base_headers: dict[str, str]
    idempotency_key: str
    pinned: list[str]
    started: float
    attempts: int = 0
    error: str = ""
    timed_out: bool = False

    def outcome(self, **fields: Any) -> ExecutorOutcome:
        return ExecutorOutcome(
            attempts=self.attempts, latency_ms=elapsed_ms(self.started), **fields
        )


def _attempt(http: httpx2.Client, call: _Call) -> tuple[bool, dict[str, Any] | None, str, str]:
    """Send attempt number `call.attempts` (freshly signed); see `_post_once`."""
    headers = call.base_headers | sign_request(
        body=call.body,
        message_id=call.idempotency_key,
        timestamp=datetime.now(UTC),  # per attempt: a retry is not a stale replay
        secrets_=active_secrets(call.tool),
    )
    # Pinned to a checked address; a retry tries the next one (a dual-stack host whose
    # first address is unreachable from here still gets its call).
    pinned = call.pinned
    extensions = {CONNECT_TO: pinned[(call.attempts - 1) % len(pinned)]} if pinned else {}
    return _post_once(http, call.tool.webhook_url, call.body, headers, extensions)


def _attempt_until_answered(http: httpx2.Client, call: _Call) -> ExecutorOutcome | None:
    """Attempt the call until the webhook answers or fails for good, as far as the retries and
    the deadline allow; None when every attempt made failed transiently (`call` says how)."""
    max_attempts = 1 + call.tool.max_retries
    while call.attempts < max_attempts:
        if call.attempts:
            pause = _backoff(call.attempts)
            left = deadlines.remaining()
            if left is not None and left <= pause:
                break  # no time for another attempt: stop here, recorded as it stands
            time.sleep(pause)
        call.attempts += 1
        try:
            ok, result, error, code = _attempt(http, call)
        except _FinalError as exc:
            return call.outcome(ok=False, result=None, error=str(exc))
        except _TransientError as exc:
            call.error, call.timed_out = str(exc), exc.timed_out
            logger.warning(
                "tool webhook attempt failed",
                extra={
                    "tool": call.tool.name,
                    "idempotency_key": call.idempotency_key,
                    "attempt": call.attempts,
                    "error": call.error,
                },
            )
            continue
        return call.outcome(ok=ok, result=result, error=error, refused=not ok, error_code=code)
    return None


def run_webhook(
    *,
    tool: ClientTool,
    params: dict[str, Any],
    conversation_id: str | None,
    idempotency_key: str,
    customer: dict[str, Any] | None = None,
) -> ExecutorOutcome:
    """POST the signed call to the tool's webhook, retrying transient failures with the same
    idempotency key (and `webhook-id`) so the client can deduplicate. Every request ends within
    the tool's `timeout_seconds` (wall clock) and all of them within `attempts_budget` and the
    turn's deadline."""
    started = time.monotonic()
    if not tool.webhook_url or not tool.signing_secret:
        # Never send an unsigned call: the client could not tell it from a forgery.
        return ExecutorOutcome.not_run(f"Tool {tool.name!r} has no webhook URL or signing secret.")
    pinned, refusal = resolve_addresses(tool.webhook_url)
    if refusal:
        return ExecutorOutcome.not_run(f"Tool {tool.name!r}: {refusal}")
    try:
        body = _request_body(
            tool=tool,
            params=params,
            conversation_id=conversation_id,
            idempotency_key=idempotency_key,
            customer=customer,
        )
    except (TypeError, ValueError) as exc:
        return ExecutorOutcome.not_run(f"Tool params are not JSON-serialisable: {exc}")
    call = _Call(
        tool=tool,
        body=body,
        base_headers=_base_headers(tool, body, idempotency_key),
        idempotency_key=idempotency_key,
        pinned=pinned,
        started=started,
    )
    release_connection()  # no database connection is held while the webhook answers
    with (
        deadlines.deadline_scope(attempts_budget(tool)),
        wall_clock_client(limit=tool.timeout_seconds, follow_redirects=False) as http,
    ):
        answered = _attempt_until_answered(http, call)
        if answered is not None:
            return answered
    if call.attempts == 0:
        call.error, call.timed_out = "No time was left to call the webhook.", True
    attempts = call.attempts
    return call.outcome(
        ok=False,
        result=None,
        error=f"{call.error} Gave up after {attempts} attempt{'s' if attempts != 1 else ''}.",
        retryable_failure=True,
        timed_out=call.timed_out,
    )


class WebhookExecutor(Executor):
    type = "webhook"
    label = gettext_noop("Webhook (the client's HTTPS endpoint)")

    def settings_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "pattern": "^https?://",
                    "maxLength": 500,
                    "title": gettext_noop("Webhook URL"),
                    "description": gettext_noop(
                        "GuideDesk POSTs the call as JSON to this https address (docs/webhooks.md)."
                    ),
                    "x-column": "webhook_url",
                    "x-missing": "the URL to call",
                },
                "secret": {
                    "type": "string",
                    "minLength": 8,
                    "maxLength": 200,
                    "writeOnly": True,
                    "title": gettext_noop("Replace signing secret"),
                    "description": gettext_noop(
                        "Leave empty to keep the current secret. A whsec_… secret (Standard "
                        "Webhooks) or any secret of at least 8 characters. Never shown again once"
                        " saved."
                    ),
                    "x-column": "signing_secret",
                    "x-missing": "a signing secret",
                },
                "rotation_secret": {
                    "type": "string",
                    "maxLength": 200,
                    "writeOnly": True,
                    "default": "",
                    "title": gettext_noop("Add rotation secret"),
                    "description": gettext_noop(
                        "A second active secret: while both are set, every request carries a "
                        "signature with each, so your server can switch to the new one at its own"
                        " pace."
                    ),
                    "x-column": "rotation_secret",
                },
                "timeout": TIMEOUT_SETTING,
                "retries": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 5,
                    "default": 2,
                    "title": gettext_noop("Retries"),
                    "description": gettext_noop(
                        "Retries after a timeout or a 5xx answer, with the same idempotency key "
                        "(at most 5)."
                    ),
                    "x-column": "max_retries",
                },
            },
            "required": ["url", "secret"],
        }

    def check(self, settings: Mapping[str, Any]) -> dict[str, str]:
        errors: dict[str, str] = {}
        for name in ("secret", "rotation_secret"):
            if settings.get(name) and (problem := secret_problem(settings[name])):
                errors[name] = problem
        return errors

    def configured(self, tool: ClientTool) -> bool:
        return bool(tool.webhook_url and tool.signing_secret)

    def run(self, *, client: Client, tool: ClientTool, execution: ToolExecution) -> ExecutorOutcome:
        conversation_id = None
        customer = None
        if execution.conversation_id is not None:
            # The public UUID, never our internal primary key, goes to the client's endpoint.
            conversation = execution.conversation
            conversation_id = str(conversation.public_id) if conversation is not None else None
            if conversation is not None and conversation.customer_verified:
                customer = {
                    "id": conversation.customer_id,
                    "email": conversation.customer_email,
                    "verified": True,
                }
        return run_webhook(
            tool=tool,
            params=execution.params,
            conversation_id=conversation_id,
            idempotency_key=execution.idempotency_key,
            customer=customer,
        )


EXECUTOR = WebhookExecutor()
