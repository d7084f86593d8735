"""A customer with a history worth erasing: real turns through the pipeline (the scripted
OpenAI-compatible server, a real webhook: a cancellation that ran, a hand-off), a second
conversation under the same address, an e-mailed reply, a note, an insights proposal, a
playground run, a simulation replay and a saved case quoting them — and another business whose
customer has the same address."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import models
from django.utils import timezone

from apps.accounts.models import Role as StaffRole
from apps.accounts.services import api_key_issue
from apps.clients.models import Client
from apps.conversations.models import Conversation, ConversationRating, Role
from apps.conversations.services import conversation_create, message_append
from apps.escalations.services import escalation_create
from apps.flags.models import MessageFlag
from apps.insights.models import InsightProposal, ProposalKind
from apps.notes.models import NoteSource, NoteType
from apps.notes.services import note_add
from apps.playground.models import PlaygroundRun
from apps.simulations.models import CaseRun, SimCase, SimulationRun
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, assess, cancel_assess, critique, make_shop

EMAIL = "zora.quill@example.org"
NAME = "Zora Quill"
VISITOR = "crm-visitor-4471"


@dataclass
class Customer:
    client: Client
    conversations: list[Conversation]
    texts: list[str] = field(default_factory=list)

    @property
    def needles(self) -> list[str]:
        return [EMAIL, NAME, VISITOR, *self.texts]


def say(chat: Chat, customer: Customer, text: str) -> None:
    customer.texts.append(text)
    chat.say(text)


def build_customer(client: Client, llm: Any, webhook: Any, capture: Any) -> Customer:
    conv, _ = conversation_create(client=client, visitor_id=VISITOR)
    Conversation.objects.filter(pk=conv.pk, client=client).update(
        contact_email=EMAIL.upper().replace("ZORA", "Zora"),  # found whatever the case
        contact_email_confirmed_at=timezone.now(),
        reply_emailed_at=timezone.now(),
        reply_emailed_seq=1,
    )
    conv.refresh_from_db()
    customer = Customer(client=client, conversations=[conv])
    chat = Chat(client, conv, capture)

    llm.script("assess", assess(response=f"Hello {NAME}, how can I help?", confidence=9))
    say(chat, customer, f"Hi, my name is {NAME} and I write from {EMAIL}")
    llm.script("assess", cancel_assess())
    llm.script("critique", critique("ASK_USER", f"{NAME}, cancel order TH-12345?", "confirm"))
    say(chat, customer, "Please cancel order TH-12345 for Zora Quill")
    llm.script("assess", cancel_assess(confirmed=True))
    llm.script("critique", critique("PROCEED", reasoning=f"{NAME} confirmed"))
    webhook.script(Reply.ok({"order_id": "TH-12345", "status": "cancelled", "email": EMAIL}))
    llm.script("compose", {"response": f"Done, {NAME}: order TH-12345 is cancelled."})
    say(chat, customer, "Yes, please go ahead and cancel it")
    escalation_create(
        client=client,
        conversation=conv,
        reason="customer_request",
        detail=f"{NAME} asked for a person about a refund to {EMAIL}",
        notify=False,
    )
    text = "Zora Quill again: where is the refund for my cancelled order?"
    message_append(client=client, conversation=conv, role=Role.USER, text=text)
    customer.texts.append(text)

    # The second conversation's address was never confirmed with the link, but it is the
    # verified customer's own e-mail (signed by the business's site): it is theirs too.
    second, _ = conversation_create(client=client)
    Conversation.objects.filter(pk=second.pk, client=client).update(
        contact_email=EMAIL,
        customer_id="cust-zq-77",
        customer_email=EMAIL,
        customer_name=NAME,
        customer_verified_via="hmac",
        customer_verified_at=timezone.now(),
    )
    second.refresh_from_db()
    text = "Second chat from Zora: do you ship hiking poles to Lisbon?"
    message_append(client=client, conversation=second, role=Role.USER, text=text)
    message_append(
        client=client, conversation=second, role=Role.ASSISTANT, text=f"Yes we do, {NAME}!"
    )
    customer.texts.append(text)
    customer.conversations.append(second)

    # What staff and the customer add around a conversation: a rating with a comment, a flag
    # with a correction quoting the customer.
    ConversationRating.objects.create(
        client=client, conversation=second, score=5, comment=f"Thanks! {NAME}, {EMAIL}"
    )
    reply = second.messages.filter(role=Role.ASSISTANT).first()
    MessageFlag.objects.create(
        client=client,
        conversation=second,
        message=reply,
        reason="wrong",
        correction=f"Say: yes {NAME}, we ship poles to Lisbon",
    )

    note_add(
        client=client,
        type=NoteType.TIP,
        content=f"{NAME} prefers e-mail at {EMAIL}",
        source=NoteSource.STAFF,
        conversation=conv,
    )
    InsightProposal.objects.create(
        client=client,
        kind=ProposalKind.ARTICLE,
        title="Refund timing",
        topic_key="refund-timing",
        count=2,
        conversation_ids=[str(conv.public_id), "00000000-0000-0000-0000-000000000001"],
        questions=[customer.texts[-2], "How long do refunds take?"],
        outline=f"- quote: {customer.texts[-2]}\n- refunds take 5 days",
    )
    PlaygroundRun.objects.create(
        client=client,
        mode="adaptive",
        question=f"What should I tell {NAME}?",
        conversation=conv,
        final={"replies": [{"text": f"Tell {NAME} the refund is on its way"}]},
    )
    SimCase.objects.create(
        client=client,
        name="zora-refund",
        history=[{"role": "user", "text": customer.texts[-2]}],
        turns=[{"customer": "Where is my refund?"}],
    )
    run = SimulationRun.objects.create(
        client=client, name="replay", report={"cases": [{"customer": customer.texts[0]}]}
    )
    CaseRun.objects.create(
        client=client,
        run=run,
        conversation=conv,
        case_name=f"replay of {NAME}",
        side="baseline",
        transcript=[{"customer": customer.texts[0], "replies": [f"Hello {NAME}"]}],
    )
    return customer


@pytest.fixture
def shop_a(db, webhook):
    return make_shop("adaptive", webhook.url(), slug="shop-a")


@pytest.fixture
def shop_b(db, webhook):
    return make_shop("adaptive", webhook.url(), slug="shop-b")


@pytest.fixture
def customer_a(shop_a, llm, webhook, django_capture_on_commit_callbacks) -> Customer:
    return build_customer(shop_a, llm, webhook, django_capture_on_commit_callbacks)


@pytest.fixture
def customer_b(shop_b, customer_a) -> Customer:
    """The same person at another business: same address, same visitor id, own texts."""
    conv, _ = conversation_create(client=shop_b, visitor_id=VISITOR)
    Conversation.objects.filter(pk=conv.pk, client=shop_b).update(
        contact_email=EMAIL, contact_email_confirmed_at=timezone.now()
    )
    conv.refresh_from_db()
    text = "Zora Quill at shop B: is my tent in stock again?"
    message_append(client=shop_b, conversation=conv, role=Role.USER, text=text)
    return Customer(client=shop_b, conversations=[conv], texts=[text])


def text_fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return [
        f
        for f in model._meta.concrete_fields
        if isinstance(f, (models.CharField, models.TextField, models.JSONField))
    ]


def walked_models() -> list[type[models.Model]]:
    """Every concrete model with a text, char or JSON field — new ones included."""
    return [
        m for m in apps.get_models() if not m._meta.proxy and m._meta.managed and text_fields(m)
    ]


def rows_holding(needles: list[str], *, skip_client: Client | None = None) -> list[str]:
    """Every (model, field, row) whose value contains one of `needles` (case-insensitive),
    walking every concrete model; rows of `skip_client` are left out."""
    lowered = [n.lower() for n in needles]
    hits: list[str] = []
    for model in walked_models():
        fields = text_fields(model)
        rows = model._base_manager.all()
        has_client = any(f.name == "client" for f in model._meta.concrete_fields)
        if skip_client is not None and has_client:
            rows = rows.exclude(client_id=skip_client.pk)
        for row in rows.values_list("pk", *[f.attname for f in fields]).iterator():
            for f, value in zip(fields, row[1:], strict=True):
                if value in (None, "", [], {}):
                    continue
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                text = text.lower()
                for needle in lowered:
                    if needle in text:
                        hits.append(f"{model._meta.label}.{f.name} #{row[0]}: {needle!r}")
    return hits


def staff_key(client: Client, role: str = StaffRole.ADMIN) -> str:
    return api_key_issue(client=client, name=f"privacy-{role}", role=role)[1]


def days_ago(n: int) -> Any:
    return timezone.now() - timedelta(days=n)
