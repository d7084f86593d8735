"""A shop with read, action and destructive webhook tools, a real OpenAI-compatible server and a
real webhook server, and helpers to talk to the assistant the way the widget will.

A pytest plugin (tests/conftest.py loads it), so every suite has these fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from apps.conversations import reply_drafts
from apps.conversations.models import Conversation, Message
from apps.conversations.services import conversation_create
from apps.knowledge.models import Article
from apps.knowledge.services.indexing import article_index
from apps.reasoning.models import ReasoningStep
from apps.reasoning.services import handle_turn
from apps.reasoning.traces import TurnRecorder
from apps.tools.executors import webhook as executors
from apps.tools.models import ToolKind
from devtools.fake_llm import FakeLLMServer, assess_reply
from tests.factories import ClientFactory, ClientToolFactory, ModelPriceFactory, PlanFactory
from tests.support.fake_webhook import FakeWebhookServer, Reply

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^TH-\\d{5}$", "description": "like TH-12345"}
    },
    "required": ["order_id"],
    "additionalProperties": False,
}
SECRET = "shop-signing-secret"


@pytest.fixture(scope="session")
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="session")
def webhook_server() -> Iterator[FakeWebhookServer]:
    with FakeWebhookServer(dedupe=True) as server:
        yield server


@pytest.fixture
def llm(llm_server: FakeLLMServer, settings: Any) -> Iterator[FakeLLMServer]:
    llm_server.reset()
    settings.OPENAI_API_KEY = "test-key"
    settings.OPENAI_BASE_URL = llm_server.base_url
    settings.LLM_MODEL = "gpt-4o-mini"
    settings.LLM_RESPONSE_FORMAT = "json_schema"
    yield llm_server
    llm_server.reset()


@pytest.fixture
def webhook(webhook_server: FakeWebhookServer, monkeypatch: Any) -> Iterator[FakeWebhookServer]:
    webhook_server.reset()
    monkeypatch.setattr(executors, "BACKOFF_BASE_SECONDS", 0, raising=False)
    yield webhook_server
    webhook_server.reset()


def make_shop(mode: str, webhook_url: str, slug: str = "shop"):
    plan = PlanFactory(slug=f"plan-{mode}", ai_mode=mode)
    ModelPriceFactory()
    client = ClientFactory(slug=slug, name="Trail Shop", plan=plan)
    common = {
        "client": client,
        "webhook_url": webhook_url,
        "signing_secret": SECRET,
        "parameters": ORDER_SCHEMA,
    }
    ClientToolFactory(
        name="get_order_status", kind=ToolKind.READ, **common, description="Look up an order."
    )
    ClientToolFactory(
        name="update_shipping_address",
        kind=ToolKind.ACTION,
        **{
            **common,
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": ORDER_SCHEMA["properties"]["order_id"],
                    "address": {"type": "string", "minLength": 10},
                },
                "required": ["order_id", "address"],
                "additionalProperties": False,
            },
        },
        description="Change where an order ships.",
    )
    ClientToolFactory(
        name="cancel_order",
        kind=ToolKind.DESTRUCTIVE,
        **common,
        description="Cancel an order that has not shipped.",
    )
    ClientToolFactory(
        name="gift_card_balance",
        kind=ToolKind.READ,
        enabled=False,
        **common,
        description="Gift card balance.",
    )
    return client


@pytest.fixture
def shop(db, webhook):
    return make_shop("adaptive", webhook.url())


@pytest.fixture
def standard_shop(db, webhook):
    return make_shop("standard", webhook.url(), slug="std-shop")


@pytest.fixture
def conversation(shop) -> Conversation:
    return conversation_create(client=shop)[0]


class SilentOwner:
    """A trace owner (apps.reasoning.traces.TraceOwner) that lets every call run and keeps
    nothing, for a step run outside any turn whose engine keeps its own record."""

    def ensure_open(self, recorder: TurnRecorder) -> None:
        return None

    def internal(self, kind: str, text: str, data: dict[str, Any]) -> None:
        return None

    def step_recorded(self, step: ReasoningStep) -> None:
        return None


class Chat:
    """Talk to the assistant as a customer; on-commit callbacks (the turn task) run eagerly."""

    def __init__(self, client: Any, conversation: Conversation, capture: Any) -> None:
        self.client = client
        self.conversation = conversation
        self._capture = capture

    @classmethod
    def new(cls, client: Any, capture: Any) -> Chat:
        """A chat on a new conversation of ``client``."""
        return cls(client, conversation_create(client=client)[0], capture)

    def say(self, text: str) -> list[Message]:
        with self._capture(execute=True):
            message = handle_turn(client=self.client, conversation=self.conversation, text=text)
        self.conversation.refresh_from_db()
        return list(
            Message.objects.filter(conversation=self.conversation, seq__gt=message.seq)
            .visible()
            .order_by("seq")
        )

    def all(self, **filters: Any) -> list[Message]:
        return list(
            Message.objects.filter(conversation=self.conversation, **filters).order_by("seq")
        )


@pytest.fixture
def chat(shop, conversation, django_capture_on_commit_callbacks) -> Chat:
    return Chat(shop, conversation, django_capture_on_commit_callbacks)


@pytest.fixture
def std_chat(standard_shop, django_capture_on_commit_callbacks) -> Chat:
    """A chat with the standard-mode shop, on a new conversation."""
    return Chat.new(standard_shop, django_capture_on_commit_callbacks)


def assess(**fields: Any) -> dict[str, Any]:
    return assess_reply(**fields)


def cancel_assess(
    order: str | None = "TH-12345", *, confirmed: bool = False, **fields: Any
) -> dict[str, Any]:
    """The model's plan to run the destructive ``cancel_order`` on ``order``: asking the customer
    to confirm first, or, once they ``confirmed``, running it. With no ``order`` the order number
    is missing. ``fields`` replace any of that."""
    plan: dict[str, Any] = {
        "response": "Cancelling now." if confirmed else f"I can cancel order {order}.",
        "tool_call": "cancel_order",
        "is_destructive": True,
        "needs_confirmation": not confirmed,
    }
    if order is None:
        plan |= {"response": "I can help cancel your order.", "missing_params": ["order_id"]}
    else:
        plan["tool_params"] = {"order_id": order}
    return assess(**(plan | fields))


def lookup_assess(order: str = "TH-12345", **fields: Any) -> dict[str, Any]:
    """The model's plan to run the read tool ``get_order_status`` on ``order``; ``fields``
    replace any of it (the reply text, the confidence)."""
    plan: dict[str, Any] = {
        "response": "Let me check.",
        "tool_call": "get_order_status",
        "tool_params": {"order_id": order},
    }
    return assess(**(plan | fields))


def script_order_lookup(llm: FakeLLMServer, webhook: FakeWebhookServer, order: str) -> None:
    """A confident look-up, no critique: the model runs ``get_order_status`` on ``order``, the
    shop answers "shipped", and the composed reply says "Order <order> has shipped."."""
    llm.script("assess", lookup_assess(order, confidence=9))
    webhook.script(Reply.ok({"status": "shipped"}))
    llm.script("compose", {"response": f"Order {order} has shipped."})


def critique(decision: str, message: str = "", reasoning: str = "checked") -> dict[str, Any]:
    return {"decision": decision, "reasoning": reasoning, "message": message}


def article(client: Any, title: str, body: str, **kw: Any) -> Article:
    """A knowledge article of `client`, stored and indexed for retrieval."""
    a = Article(client=client, title=title, body=body, **kw)
    a.refresh_hash()
    a.save()
    article_index(article=a)
    return a


@pytest.fixture
def drafts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every reply draft the turn writes, in order (the throttle off: every piece is written)."""
    written: list[str] = []
    write = reply_drafts.reply_draft_write

    def recording(*, conversation_id: int, turn_id: int, text: str) -> None:
        written.append(text)
        write(conversation_id=conversation_id, turn_id=turn_id, text=text)

    monkeypatch.setattr(reply_drafts, "reply_draft_write", recording)
    monkeypatch.setattr(reply_drafts, "MIN_INTERVAL_SECONDS", 0)
    return written
