"""Staff API fixtures: credentials of every role (API keys and staff sessions) for two tenants,
and a tenant with real data — a conversation with turns, an escalation, a tool and its runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.test import APIClient

from apps.accounts.models import Role
from apps.clients.models import Client
from apps.conversations.models import Conversation, Kind
from apps.conversations.models import Role as MessageRole
from apps.conversations.services import conversation_create, message_append
from apps.escalations.models import Escalation
from apps.escalations.services import escalation_create
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from apps.tools.models import ClientTool, ExecutionStatus, ToolExecution
from tests.conftest import credentials_for
from tests.factories import ClientToolFactory
from tests.support.messages import internal_message

ROLES = [Role.VIEWER, Role.AGENT, Role.ADMIN, Role.OWNER]
AUTH_KINDS = ["api_key", "session"]


@pytest.fixture
def caller(client_a: Client) -> Callable[[str, str], APIClient]:
    """caller(auth_kind, role) → an API client for client A with that role."""

    def make(kind: str, role: str) -> APIClient:
        return credentials_for(client_a, role, kind)

    return make


@dataclass
class TenantData:
    client: Client
    conversation: Conversation
    escalation: Escalation
    quiet_conversation: Conversation
    tool: ClientTool
    execution: ToolExecution
    trace: ReasoningTrace


def add_turn(client: Client, conv: Conversation, text: str = "Where is my order?") -> Any:
    """One recorded turn on `conv` — the customer message, a trace with two steps, an internal
    assessment and the visible reply — written the way the pipeline writes them."""
    user_message = message_append(
        client=client, conversation=conv, role=MessageRole.USER, text=text
    )
    trace = ReasoningTrace.objects.create(
        client=client,
        conversation=conv,
        user_message=user_message,
        mode="adaptive",
        model="gpt-4o-mini",
        status="done",
        critique_triggered=True,
        critique_reasons=["low_confidence"],
        context_fetched=["policies.returns"],
        llm_calls=2,
        prompt_tokens=700,
        completion_tokens=80,
        duration_ms=1500,
    )
    for index, name in enumerate(["assess", "critique"], start=1):
        ReasoningStep.objects.create(
            client=client,
            trace=trace,
            index=index,
            name=name,
            input_summary=f"{name} input",
            output={"step": name},
            latency_ms=100 * index,
            prompt_tokens=350,
            completion_tokens=40,
        )
    internal_message(conv, Kind.ASSESSMENT, "Confidence 5/10", data={"confidence": 5}, trace=trace)
    message_append(
        client=client,
        conversation=conv,
        role=MessageRole.ASSISTANT,
        text="Let me check that for you.",
        trace=trace,
    )
    return trace


def make_conversation_with_turn(
    client: Client, text: str = "Where is my order?"
) -> tuple[Conversation, ReasoningTrace]:
    conv, _ = conversation_create(client=client, visitor_id="visitor-1")
    return conv, add_turn(client, conv, text)


def escalate_turns(client: Client, n: int) -> None:
    """`n` more conversations, each with one turn, each escalated."""
    for _ in range(n):
        conv, _ = make_conversation_with_turn(client)
        escalation_create(client=client, conversation=conv, reason="policy", notify=False)


def make_tenant_data(client: Client) -> TenantData:
    conv, trace = make_conversation_with_turn(client)
    escalation = escalation_create(
        client=client, conversation=conv, reason="customer_request", detail="asked", notify=False
    )
    quiet, _ = make_conversation_with_turn(client, text="Do you ship abroad?")
    tool = ClientToolFactory(client=client, name="lookup_order")
    execution = ToolExecution.objects.create(
        client=client,
        conversation=conv,
        trace=trace,
        tool=tool,
        params={"order_id": "TH-12345"},
        idempotency_key=f"key-{client.slug}-1",
        status=ExecutionStatus.SUCCEEDED,
        result={"status": "shipped"},
        attempts=1,
        latency_ms=42,
    )
    return TenantData(
        client=client,
        conversation=conv,
        escalation=escalation,
        quiet_conversation=quiet,
        tool=tool,
        execution=execution,
        trace=trace,
    )


@pytest.fixture
def data_a(client_a: Client) -> TenantData:
    return make_tenant_data(client_a)


@pytest.fixture
def data_b(client_b: Client) -> TenantData:
    return make_tenant_data(client_b)


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response has `status` and the one error shape; returns the error object."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert {"code", "message"} <= set(body["error"])
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


@pytest.fixture
def keep_connection_in_test_transaction() -> Iterator[None]:
    """Schemathesis drives the WSGI app directly; Django would close the database connection
    at the start and end of each request, which inside the test's transaction throws the test
    data away. Django's own test client suspends these handlers the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
