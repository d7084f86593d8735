"""Webhooks signed per Standard Webhooks (verified here with the `standardwebhooks`
package a tenant would use), two active secrets during a rotation, the legacy header during its
deprecation window, and secrets that are write-only everywhere (admin, API, importer)."""

from __future__ import annotations

import base64
import copy
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from apps.provisioning.services import tenant_import
from apps.tools.executors.webhook import (
    generate_secret,
    run_webhook,
    secret_key,
    sign_request,
)
from apps.tools.models import ClientTool
from tests.clients.test_import import demo_data
from tests.factories import ClientToolFactory
from tests.support.fake_webhook import FakeWebhookServer, Reply, verify_signature

pytestmark = pytest.mark.django_db

WHSEC = "whsec_" + base64.b64encode(b"k" * 32).decode()
KEY = "pa-0123456789abcdef"


def call(tool: ClientTool) -> Any:
    return run_webhook(
        tool=tool, params={"order_id": "#W1001"}, conversation_id="conv-1", idempotency_key=KEY
    )


def webhook_headers(request: Any) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.startswith("webhook-")}


def test_a_whsec_secret_verifies_with_the_standardwebhooks_library(client_a, hook):
    tool = ClientToolFactory(client=client_a, webhook_url=hook.url(), signing_secret=WHSEC)
    hook.script(Reply.fail("busy", status=503), Reply.ok({"status": "cancelled"}))
    assert call(tool).ok
    first, second = hook.requests
    for request in (first, second):
        payload = Webhook(WHSEC).verify(request.raw_body, request.headers)
        assert payload["idempotency_key"] == KEY
        assert request.headers["webhook-id"] == request.headers["idempotency-key"] == KEY
        assert request.headers["webhook-signature"].startswith("v1,")
        assert abs(int(request.headers["webhook-timestamp"]) - datetime.now(UTC).timestamp()) < 60
    # the id is the same on the retry (the receiver dedupes on it); the body too
    assert first.raw_body == second.raw_body
    # a signature for other content or another secret does not verify
    with pytest.raises(WebhookVerificationError):
        Webhook(WHSEC).verify(first.raw_body.replace(b"W1001", b"W2002"), first.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(first.raw_body, first.headers)


def test_a_secret_in_another_form_signs_with_its_own_bytes(client_a, hook):
    tool = ClientToolFactory(
        client=client_a, webhook_url=hook.url(), signing_secret="legacy-s3cret"
    )
    assert call(tool).ok
    [request] = hook.requests
    Webhook(b"legacy-s3cret").verify(request.raw_body, request.headers)
    # the deprecated header is still sent, with the old scheme, during the deprecation window
    assert verify_signature(request, "legacy-s3cret")


def test_the_legacy_header_can_be_switched_off(client_a, hook, settings):
    settings.TOOL_WEBHOOK_LEGACY_SIGNATURE = False
    tool = ClientToolFactory(client=client_a, webhook_url=hook.url(), signing_secret=WHSEC)
    assert call(tool).ok
    [request] = hook.requests
    assert "x-guidedesk-signature" not in request.headers
    Webhook(WHSEC).verify(request.raw_body, request.headers)


def test_during_a_rotation_both_secrets_sign_every_request(client_a, hook):
    new = generate_secret()
    tool = ClientToolFactory(
        client=client_a, webhook_url=hook.url(), signing_secret=WHSEC, rotation_secret=new
    )
    assert call(tool).ok
    [request] = hook.requests
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Webhook(WHSEC).verify(request.raw_body, request.headers)  # the receiver still on the old one
    Webhook(new).verify(request.raw_body, request.headers)  # … or already on the new one


def test_an_old_timestamp_is_refused_by_the_receiver():
    """What the tolerance window means for a replay: the library refuses a timestamp more than
    five minutes away."""
    body = b'{"ok":true}'
    old = datetime.now(UTC) - timedelta(minutes=6)
    headers = sign_request(body=body, message_id=KEY, timestamp=old, secrets_=[WHSEC])
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(WHSEC).verify(body, headers)
    fresh = sign_request(body=body, message_id=KEY, timestamp=datetime.now(UTC), secrets_=[WHSEC])
    Webhook(WHSEC).verify(body, fresh)


def test_generated_secrets_are_whsec_with_32_random_bytes():
    first, second = generate_secret(), generate_secret()
    assert first.startswith("whsec_") and first != second
    assert len(secret_key(first)) == 32
    assert secret_key("plain-secret") == b"plain-secret"


# --- write-only everywhere ------------------------------------------------------------------


def change_url(tool: ClientTool) -> str:
    return reverse("admin:tools_clienttool_change", args=[tool.pk])


def form_data(tool: ClientTool, **overrides: Any) -> dict[str, Any]:
    data = {
        "name": tool.name,
        "description": tool.description,
        "kind": tool.kind,
        "enabled": "on",
        "parameters": '{"type": "object"}',
        "executor_type": "webhook",
        "webhook_url": tool.webhook_url,
        "signing_secret": "",
        "rotation_secret": "",
        "rotation": "",
        "timeout_seconds": "10",
        "max_retries": "2",
        "builtin_handler": "",
        "result_template": "",
    }
    return data | overrides


def test_the_tool_change_page_never_contains_a_secret(admin_client, client_a):
    tool = ClientToolFactory(
        client=client_a, signing_secret=WHSEC, rotation_secret="rotation-s3cret"
    )
    body = admin_client.get(change_url(tool)).content.decode()
    assert "Replace signing secret" in body and "Add rotation secret" in body
    for secret in (WHSEC, WHSEC[6:], "rotation-s3cret"):
        assert secret not in body
    # nor after a failed save that re-renders the form with what was typed
    response = admin_client.post(
        change_url(tool), form_data(tool, signing_secret="typed-new-s3cret", timeout_seconds="0")
    )
    assert response.status_code == 200
    assert "typed-new-s3cret" not in response.content.decode()
    assert WHSEC not in response.content.decode()


def test_an_empty_field_keeps_the_secret_and_a_value_replaces_it(admin_client, client_a):
    tool = ClientToolFactory(client=client_a, signing_secret=WHSEC)
    assert admin_client.post(change_url(tool), form_data(tool)).status_code == 302
    tool.refresh_from_db()
    assert tool.signing_secret == WHSEC
    assert admin_client.post(
        change_url(tool), form_data(tool, signing_secret="new-s3cret!")
    ).status_code
    tool.refresh_from_db()
    assert tool.signing_secret == "new-s3cret!"
    response = admin_client.post(change_url(tool), form_data(tool, signing_secret="short"))
    assert "at least 8 characters" in response.content.decode()


def test_a_generated_secret_is_shown_once(admin_client, client_a):
    tool = ClientToolFactory(client=client_a, signing_secret="old-s3cret")
    response = admin_client.post(
        change_url(tool), form_data(tool, generate_secret="on"), follow=True
    )
    tool.refresh_from_db()
    assert tool.signing_secret.startswith("whsec_")
    assert tool.signing_secret in response.content.decode()  # the one time it is shown
    assert tool.signing_secret not in admin_client.get(change_url(tool)).content.decode()


def test_a_rotation_from_start_to_end(admin_client, client_a):
    tool = ClientToolFactory(client=client_a, signing_secret=WHSEC)
    new = generate_secret()
    admin_client.post(change_url(tool), form_data(tool, rotation_secret=new))
    tool.refresh_from_db()
    assert (tool.signing_secret, tool.rotation_secret) == (WHSEC, new)
    assert "rotation under way" in admin_client.get(change_url(tool)).content.decode()
    admin_client.post(change_url(tool), form_data(tool, rotation="promote"))
    tool.refresh_from_db()
    assert (tool.signing_secret, tool.rotation_secret) == (new, "")
    # cancelling a rotation drops the second secret and keeps the first
    admin_client.post(change_url(tool), form_data(tool, rotation_secret=WHSEC))
    admin_client.post(change_url(tool), form_data(tool, rotation="drop"))
    tool.refresh_from_db()
    assert (tool.signing_secret, tool.rotation_secret) == (new, "")
    response = admin_client.post(change_url(tool), form_data(tool, rotation="promote"))
    assert "no rotation secret" in response.content.decode()


def test_the_importer_accepts_whsec_and_rotation_secrets_and_old_files():
    data = copy.deepcopy(demo_data())
    webhook_tools = [
        t for c in data["clients"] for t in c["tools"] if t["executor"]["type"] == "webhook"
    ]
    assert webhook_tools, "the demo tenant has a webhook tool"
    tenant_import(data=data)  # the format as it was: a plain secret, no rotation secret
    webhook_tools[0]["executor"] |= {"secret": WHSEC, "rotation_secret": "next-s3cret"}
    tenant_import(data=data)
    tool = ClientTool.objects.unscoped("test checks the database directly").get(
        name=webhook_tools[0]["name"]
    )
    assert (tool.signing_secret, tool.rotation_secret) == (WHSEC, "next-s3cret")


def test_the_api_never_returns_a_secret(owner_a, client_a):
    ClientToolFactory(
        client=client_a, name="t", signing_secret=WHSEC, rotation_secret="rotation-s3cret"
    )
    body = owner_a.get("/api/v1/tools/").content.decode()
    assert '"t"' in body
    assert WHSEC not in body and "rotation-s3cret" not in body and "secret" not in body


@pytest.fixture
def owner_a(client_a):
    from apps.accounts.services import api_key_issue
    from tests.conftest import api_for

    return api_for(api_key_issue(client=client_a, name="a")[1])


_ = FakeWebhookServer  # (the `hook` fixture comes from tests/tools/conftest.py)


def test_a_new_tool_is_offered_a_generated_secret(admin_client, client_a):
    page = admin_client.get(reverse("admin:tools_clienttool_add")).content.decode()
    assert re.search(r'<input[^>]*name="generate_secret"[^>]*checked', page)
    data = form_data(ClientToolFactory.build(client=client_a, name="new_tool"))
    data |= {"client": client_a.pk, "generate_secret": "on"}
    response = admin_client.post(reverse("admin:tools_clienttool_add"), data, follow=True)
    tool = ClientTool.objects.unscoped("test checks the database directly").get(name="new_tool")
    assert tool.signing_secret.startswith("whsec_")
    assert tool.signing_secret in response.content.decode()  # shown once
