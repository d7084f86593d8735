"""Hostile input on EVERY operation of the OpenAPI schema: schemathesis generates a
case per operation, and a Hypothesis strategy puts an attack into it — deep nesting, lone
surrogates, NUL characters, huge numbers or an oversized body — in the body, a query parameter,
a path parameter or a header. Whatever arrives, the answer is never a 5xx, and every error is
the one JSON shape.

Requests carry real credentials and real ids (a conversation, an escalation, a tool, a key), so
the attack reaches the view's parsing and validation instead of stopping at a 401/404. Each case
runs in a savepoint that is rolled back. The upload limit is lowered for this module, so an
"oversized" body costs kilobytes, not megabytes."""

from __future__ import annotations

import json
import re
import uuid
from datetime import date, timedelta
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from django.core.cache import cache
from django.core.signals import request_finished
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.test import Client as DjangoClient
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.approvals.models import ApprovalRequest
from apps.conversations.services import conversation_create
from apps.escalations.models import ReplyTemplate
from apps.events.models import EventDelivery, EventSubscription, EventType
from apps.flags.models import MessageFlag
from apps.mail.channels import mail_channel_create
from apps.privacy.models import DataSubjectRequest
from apps.tools.models import McpAuth, McpServer
from tests.api.conftest import make_tenant_data
from tests.api.test_schema import generated_schema, make_note
from tests.factories import ClientFactory
from tests.support.fuzz import reproducible

pytestmark = pytest.mark.django_db

ORIGIN = "https://fuzzed.example"
UPLOAD_LIMIT = 4096  # DATA_UPLOAD_MAX_MEMORY_SIZE for this module

every_operation = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())

# ----------------------------------------------------------------------------------- attacks


def _nested(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


HOSTILE_STRINGS = st.sampled_from(
    [
        "\ud800",
        "a\udfffb",
        "\x00",
        "nul\x00inside",
        "\ud83d",  # half of an emoji
        "\u0000\ud800",
    ]
)
HUGE_NUMBERS = st.sampled_from(
    ["1e400", "-1e400", "1" + "0" * 40, "-" + "9" * 30, "9" * 5000, "1e-400", "123456789" * 3]
)


@st.composite
def body_attacks(draw: Any) -> tuple[str, str]:
    """(label, raw JSON body text)."""
    kind = draw(
        st.sampled_from(["deep", "surrogate_or_nul", "hostile_key", "huge_number", "oversized"])
    )
    if kind == "deep":
        depth = draw(st.sampled_from([33, 100, 999, 1_001, 5_000, 20_000]))
        return kind, _nested(depth, draw(st.sampled_from(["array", "object"])))
    field = draw(st.sampled_from(["text", "visitor_id", "name", "description", "role", "x"]))
    if kind == "surrogate_or_nul":
        # json.dumps with ensure_ascii writes "\ud800" as its escape, as an attacker would
        return kind, json.dumps({field: draw(HOSTILE_STRINGS)})
    if kind == "hostile_key":
        return kind, json.dumps({draw(HOSTILE_STRINGS): 1, field: "ok"})
    if kind == "huge_number":
        return kind, f'{{"{field}": {draw(HUGE_NUMBERS)}}}'
    return kind, json.dumps({field: "x" * draw(st.integers(UPLOAD_LIMIT, 3 * UPLOAD_LIMIT))})


# Raw percent-encoded query / path values: NUL, invalid UTF-8 (what a lone surrogate becomes
# in a URL), huge numbers, long values.
RAW_URL_VALUES = st.sampled_from(
    ["%00", "a%00b", "%ED%A0%80", "%FF%FE", "9" * 40, "1e400", "-1", "x" * 5000, "%2e%2e%2f"]
)


@st.composite
def attacks(draw: Any) -> dict[str, Any]:
    where = draw(st.sampled_from(["body", "body", "query", "path", "header"]))
    if where == "body":
        label, body = draw(body_attacks())
        return {"where": where, "label": label, "body": body}
    if where == "header":
        # WSGI hands headers over as latin-1 text: invalid UTF-8 (a surrogate's bytes) arrives
        # as "\xed\xa0\x80", never as a surrogate itself
        value = draw(st.sampled_from(["\x00", "\xed\xa0\x80", "9" * 40, "x" * 5000, "\xc3\xa9"]))
        name = draw(st.sampled_from(["X-Widget-Key", "Authorization", "Last-Event-ID"]))
        if name == "Authorization" and draw(st.booleans()):
            value = "Api-Key " + value
        return {"where": where, "label": name, "value": value}
    return {"where": where, "label": where, "value": draw(RAW_URL_VALUES)}


# ---------------------------------------------------------------------------------- fixtures


@pytest.fixture
def tenant(db: Any) -> dict[str, Any]:
    client = ClientFactory(slug="fuzzed", allowed_origins=[ORIGIN])
    data = make_tenant_data(client)
    make_tenant_data(ClientFactory(slug="other-tenant"))
    widget_conversation, token = conversation_create(client=client)
    secret = api_key_issue(client=client, name="fuzzer", role=Role.OWNER)[1]
    reply = data.conversation.messages.filter(role="assistant", visibility="visible").first()
    template = ReplyTemplate.objects.create(client=client, name="Thanks", shortcut="t", body="Hi")
    approval = ApprovalRequest.objects.create(
        client=client,
        conversation=data.conversation,
        tool=data.tool,
        params={"order_id": "TH-10042"},
        params_hash="0" * 64,
        idempotency_key="fuzz-approval",
        requested_in=data.conversation.messages.filter(role="user").first(),
        expires_at=timezone.now() + timedelta(minutes=30),
    )
    privacy_request = DataSubjectRequest.objects.create(
        client=client, kind="erase", match_kind="email", channel="api", keep_until=date.today()
    )
    to_revoke = api_key_issue(client=client, name="to revoke", role=Role.VIEWER)[0]
    subscription = EventSubscription.objects.create(
        client=client, url="https://hooks.example.com/guidedesk", secret="whsec_fuzz"
    )
    delivery = EventDelivery.objects.create(
        client=client,
        subscription=subscription,
        event_id=uuid.uuid4(),
        event_type=EventType.CONVERSATION_CREATED,
    )
    # Unreachable on purpose: a sync fails fast on DNS and must answer cleanly.
    mcp_server = McpServer.objects.create(
        client=client, name="crm", url="https://mcp.example.com/mcp", auth=McpAuth.NONE
    )
    mail_channel = mail_channel_create(
        client=client,
        address="support@fuzzed.example",
        inbound_via="mailgun",
        webhook_secret="mailgun-key-fuzz",
    )
    return {
        "ids": {
            "public_id": str(data.conversation.public_id),
            "server_name": mcp_server.name,
            "channel_id": str(mail_channel.public_id),
            "escalation_id": str(getattr(data.escalation, "public_id", data.escalation.pk)),
            "name": data.tool.name,
            "key_id": str(to_revoke.pk),
            "conversation_id": str(widget_conversation.public_id),
            "note_id": str(make_note(client).pk),
            "template_id": str(template.public_id),
            "approval_id": str(approval.public_id),
            "request_id": str(privacy_request.public_id),
            "subscription_id": str(subscription.public_id),
            "delivery_id": str(delivery.event_id),
            "flag_id": str(
                MessageFlag.objects.create(
                    client=client, conversation=data.conversation, message=reply, reason="wrong"
                ).public_id
            ),
        },
        "staff": {"HTTP_AUTHORIZATION": f"Api-Key {secret}"},
        "widget": {
            "HTTP_X_WIDGET_KEY": client.widget_key,
            "HTTP_ORIGIN": ORIGIN,
            "HTTP_AUTHORIZATION": f"Bearer {token}",
        },
        "key": client.widget_key,
        "token": token,
    }


def _path(case: Any, ids: dict[str, str], attack: dict[str, Any]) -> str:
    path = case.operation.path
    names = re.findall(r"{(\w+)}", path)
    hostile = names[0] if attack["where"] == "path" and names else None
    for name in names:
        value = attack["value"] if name == hostile else quote(ids[name], safe="")
        path = path.replace("{" + name + "}", value)
    return path


def _query(case: Any, tenant: dict[str, Any], attack: dict[str, Any]) -> str:
    query: dict[str, Any] = {
        k: v for k, v in (case.query or {}).items() if k not in {"client", "key", "token"}
    }
    if case.operation.path.endswith("/events"):  # EventSource's way to authenticate
        query.update(key=tenant["key"], token=tenant["token"])
    encoded = urlencode(query, doseq=True)
    if attack["where"] == "query":
        names = [p.name for p in case.operation.query] or ["q"]
        name = names[len(attack["value"]) % len(names)]
        encoded = "&".join(filter(None, [encoded, f"{name}={attack['value']}"]))
    return encoded


def _headers(case: Any, tenant: dict[str, Any], attack: dict[str, Any]) -> dict[str, str]:
    widget = case.operation.path.startswith("/api/v1/widget/")
    headers = dict(tenant["widget"] if widget else tenant["staff"])
    if attack["where"] == "header":
        header = "HTTP_" + attack["label"].upper().replace("-", "_")
        value = attack["value"]
        if header == "HTTP_AUTHORIZATION" and not value.startswith("Api-Key "):
            value = f"Bearer {value}"
        headers[header] = value
    return headers


def _body(case: Any, attack: dict[str, Any]) -> str | None:
    if attack["where"] == "body":
        return str(attack["body"])
    if case.body is not None and not isinstance(case.body, bytes):
        try:
            return json.dumps(case.body)
        except (TypeError, ValueError):
            return None
    return None


def test_every_operation_of_the_schema_is_attacked() -> None:
    """The module covers every operation the schema documents (none filtered out)."""
    documented = {
        (path, method.upper())
        for path, item in generated_schema()["paths"].items()
        for method in item
    }
    assert set(OPERATIONS) == documented
    assert len(OPERATIONS) >= 19


OPERATIONS = sorted(
    (result.ok().path, result.ok().method.upper())
    for result in every_operation.get_all_operations()
)


@pytest.mark.parametrize(("path", "method"), OPERATIONS, ids=[f"{m} {p}" for p, m in OPERATIONS])
@reproducible(10)
@given(data=st.data())
def test_hostile_input_never_gives_a_server_error(
    path: str,
    method: str,
    data: Any,
    tenant: dict[str, Any],
    settings: Any,
) -> None:
    case = data.draw(every_operation[path][method].as_strategy(), label="case")
    attack = data.draw(attacks(), label="attack")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = UPLOAD_LIMIT
    cache.clear()  # throttling is tested elsewhere; every case should reach the view
    url_path = _path(case, tenant["ids"], attack)
    query = _query(case, tenant, attack)
    body = _body(case, attack)
    http = DjangoClient(raise_request_exception=False)
    method = case.method.lower()
    kwargs: dict[str, Any] = dict(_headers(case, tenant, attack))
    if body is not None and method != "get":
        kwargs.update(data=body, content_type="application/json")
    url = f"{url_path}?{query}" if query else url_path
    with transaction.atomic():
        response = getattr(http, method)(url, **kwargs)
        transaction.set_rollback(True)
    where = f"{case.method} {url[:120]} ({attack['where']}: {attack['label']})"
    try:
        assert response.status_code < 500, (where, response.content[:300])
        content_type = response.get("Content-Type", "")
        if response.status_code >= 400:
            assert content_type.startswith("application/json"), (where, content_type)
            error = json.loads(response.content)["error"]
            assert {"code", "message"} <= set(error), where
        elif attack["where"] == "body" and case.operation.body:
            # an operation that reads a body never accepts a hostile one
            raise AssertionError((where, response.status_code, response.content[:300]))
    finally:
        if response.streaming:
            # An event stream is closed without being read. Closing sends `request_finished`,
            # whose `close_old_connections` would close the database connection (and the
            # test's transaction with it): suspended here as the test client does.
            request_finished.disconnect(close_old_connections)
            try:
                response.close()
            finally:
                request_finished.connect(close_old_connections)
