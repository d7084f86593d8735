"""The webhook and builtin executors, against a real local HTTP server."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from apps.clients.models import Client
from apps.tools.executors import ExecutorOutcome
from apps.tools.executors import webhook as executors
from apps.tools.executors.builtin import GENERIC_BUILTIN_ERROR, run_builtin
from apps.tools.executors.webhook import run_webhook, sign_body
from apps.tools.models import ClientTool, ExecutorType
from tests.factories import ClientToolFactory
from tests.support.fake_webhook import FakeWebhookServer, Reply, sign, verify_signature

SECRET = "s3cret-for-acme"
KEY = "turn-42:get_order_status"


@pytest.fixture
def tool(client_a: Client, hook: FakeWebhookServer) -> ClientTool:
    return ClientToolFactory(
        client=client_a,
        name="get_order_status",
        webhook_url=hook.url(),
        signing_secret=SECRET,
        timeout_seconds=0.5,
        max_retries=2,
    )


def call(tool: ClientTool, params: dict[str, object] | None = None) -> ExecutorOutcome:
    return run_webhook(
        tool=tool,
        params={"order_id": "TH-12345"} if params is None else params,
        conversation_id="conv-1",
        idempotency_key=KEY,
    )


def test_sign_body_matches_an_independent_hmac() -> None:
    body = b'{"a":1}'
    assert sign_body(body, SECRET) == sign(body, SECRET)
    assert sign_body(body, SECRET).startswith("sha256=")
    assert sign_body(body, "other") != sign_body(body, SECRET)


def test_posts_the_signed_protocol_body_and_headers(
    tool: ClientTool, hook: FakeWebhookServer
) -> None:
    hook.script(Reply.ok({"status": "shipped"}))

    outcome = call(tool)

    assert outcome == ExecutorOutcome(
        ok=True,
        result={"status": "shipped"},
        error="",
        attempts=1,
        latency_ms=outcome.latency_ms,
        retryable_failure=False,
    )
    [request] = hook.requests
    assert request.method == "POST"
    assert request.path == "/hook"
    assert request.json == {
        "tool": "get_order_status",
        "params": {"order_id": "TH-12345"},
        "conversation_id": "conv-1",
        "idempotency_key": KEY,
    }
    # The signed bytes are the compact, key-sorted serialisation.
    assert (
        request.raw_body == json.dumps(request.json, separators=(",", ":"), sort_keys=True).encode()
    )
    assert verify_signature(request, SECRET)
    assert not verify_signature(request, "someone-elses-secret")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["idempotency-key"] == KEY
    assert request.headers["user-agent"] == "GuideDesk-Webhook/1"


def test_500_then_200_retries_with_the_same_key_and_body(
    tool: ClientTool, hook: FakeWebhookServer
) -> None:
    hook.script(Reply.fail("database down", status=500), Reply.ok({"status": "shipped"}))

    outcome = call(tool)

    assert outcome.ok
    assert outcome.result == {"status": "shipped"}
    assert outcome.attempts == 2
    first, second = hook.requests
    assert first.idempotency_key == second.idempotency_key == KEY
    assert first.raw_body == second.raw_body
    assert verify_signature(second, SECRET)


def test_timeout_is_retried(tool: ClientTool, hook: FakeWebhookServer) -> None:
    hook.script(Reply.ok({"late": True}, delay=5), Reply.ok({"status": "shipped"}))

    outcome = call(tool)

    assert outcome.ok
    assert outcome.result == {"status": "shipped"}
    assert outcome.attempts == 2
    assert len(hook.requests) == 2


def test_429_is_retried(tool: ClientTool, hook: FakeWebhookServer) -> None:
    hook.script(Reply(status=429), Reply.ok({"status": "shipped"}))

    outcome = call(tool)

    assert outcome.ok
    assert outcome.attempts == 2


def test_exhausted_retries_fail_as_retryable(tool: ClientTool, hook: FakeWebhookServer) -> None:
    hook.default(Reply.fail("database down", status=503))

    outcome = call(tool)

    assert not outcome.ok
    assert outcome.result is None
    assert outcome.retryable_failure
    assert outcome.attempts == 3  # 1 + max_retries
    assert len(hook.requests) == 3
    assert "HTTP 503" in outcome.error
    assert "database down" in outcome.error
    assert "3 attempts" in outcome.error


def test_unreachable_webhook_is_retried_then_retryable(
    client_a: Client, hook: FakeWebhookServer
) -> None:
    url = hook.url()
    hook.stop()  # nothing listens on the port any more
    tool = ClientToolFactory(client=client_a, webhook_url=url, signing_secret=SECRET, max_retries=1)

    outcome = call(tool)

    assert not outcome.ok
    assert outcome.retryable_failure
    assert outcome.attempts == 2
    assert "Could not reach the webhook" in outcome.error


def test_400_is_final_and_not_retried(tool: ClientTool, hook: FakeWebhookServer) -> None:
    hook.default(Reply.fail("unknown parameter 'foo'", status=400))

    outcome = call(tool)

    assert not outcome.ok
    assert not outcome.retryable_failure
    assert outcome.attempts == 1
    assert len(hook.requests) == 1
    assert "HTTP 400" in outcome.error
    assert "unknown parameter 'foo'" in outcome.error


def test_ok_false_carries_the_clients_error(tool: ClientTool, hook: FakeWebhookServer) -> None:
    hook.default(Reply.fail("Order TH-12345 has already shipped."))

    outcome = call(tool)

    assert not outcome.ok
    assert outcome.error == "Order TH-12345 has already shipped."
    assert outcome.attempts == 1  # an answer, not a transport failure: no retry
    assert not outcome.retryable_failure


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(body="<html>Welcome</html>"), "not valid JSON"),
        (Reply(json={"result": {"status": "shipped"}}), '"ok"'),
        (Reply(json={"ok": "yes"}), '"ok"'),
        (Reply(json=["ok"]), '"ok"'),
        (Reply(json={"ok": True, "result": "shipped"}), '"result"'),
    ],
)
def test_off_protocol_2xx_replies_fail_clearly(
    tool: ClientTool, hook: FakeWebhookServer, reply: Reply, message: str
) -> None:
    hook.default(reply)

    outcome = call(tool)

    assert not outcome.ok
    assert message in outcome.error
    assert outcome.attempts == 1


def test_redirects_are_not_followed(tool: ClientTool, hook: FakeWebhookServer) -> None:
    hook.script(Reply(status=307, headers={"Location": hook.url("/elsewhere")}))

    outcome = call(tool)

    assert not outcome.ok
    assert "redirect" in outcome.error
    assert [r.path for r in hook.requests] == ["/hook"]


def test_webhook_without_secret_is_never_called(client_a: Client, hook: FakeWebhookServer) -> None:
    tool = ClientToolFactory(client=client_a, webhook_url=hook.url(), signing_secret="")

    outcome = call(tool)

    assert not outcome.ok
    assert outcome.attempts == 0
    assert hook.requests == []


# -- builtin ---------------------------------------------------------------------------------


def builtin_tool(client: Client, handler: str) -> ClientTool:
    return ClientToolFactory(
        client=client,
        executor_type=ExecutorType.BUILTIN,
        builtin_handler=handler,
        webhook_url="",
        signing_secret="",
    )


def test_builtin_success(client_a: Client) -> None:
    tool = builtin_tool(client_a, "demo.get_order_status")

    outcome = run_builtin(tool=tool, client=client_a, params={"order_id": "TH-12345"}, context={})

    assert outcome.ok
    assert outcome.attempts == 1
    assert outcome.result is not None
    assert outcome.result["order_id"] == "TH-12345"


def test_builtin_tool_error_is_a_failed_outcome_with_its_message(client_a: Client) -> None:
    tool = builtin_tool(client_a, "demo.get_order_status")

    outcome = run_builtin(tool=tool, client=client_a, params={"order_id": "TH-10000"}, context={})

    assert not outcome.ok
    assert outcome.result is None
    assert outcome.error == "We couldn't find order TH-10000. Please check the number."


def test_builtin_crash_is_a_generic_failure_and_logged(
    client_a: Client, caplog: pytest.LogCaptureFixture
) -> None:
    tool = builtin_tool(client_a, "demo.get_order_status")

    with caplog.at_level(logging.ERROR, logger="apps.tools.executors"):
        outcome = run_builtin(tool=tool, client=client_a, params={}, context={})  # no order_id

    assert not outcome.ok
    assert outcome.error == GENERIC_BUILTIN_ERROR
    assert "KeyError" not in outcome.error  # internals stay out of customer-facing text
    assert any(record.exc_info for record in caplog.records)


def test_builtin_with_unknown_handler_fails(client_a: Client) -> None:
    tool = builtin_tool(client_a, "demo.does_not_exist")

    outcome = run_builtin(tool=tool, client=client_a, params={}, context={})

    assert not outcome.ok
    assert outcome.attempts == 0
    assert "demo.does_not_exist" in outcome.error


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
    ],
)
def test_webhook_to_a_private_address_is_refused_without_a_request(
    hook: FakeWebhookServer, client_a: Client, settings: Any, url: str
) -> None:
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    tool = ClientToolFactory(client=client_a, webhook_url=url, signing_secret=SECRET)
    outcome = executors.run_webhook(
        tool=tool, params={"order_id": "TH-12345"}, conversation_id=None, idempotency_key=KEY
    )
    assert not outcome.ok
    assert outcome.attempts == 0
    assert "non-public address" in outcome.error
    assert hook.requests == []


def test_private_networks_allowed_when_configured(hook, client_a, settings):
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = True
    assert executors.destination_refusal(hook.url()) == ""
    settings.TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = False
    assert "non-public" in executors.destination_refusal(hook.url())
    assert executors.destination_refusal("ftp://example.com/x") != ""
