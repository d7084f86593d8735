"""Erasure reaches every copy of one customer's identifiers — name, e-mail address, street
address, order number, phone number — not only their conversations: knowledge articles and FAQs
written from their chat (redacted, not deleted, and indexed again), insights runs and proposals,
saved simulation cases, replays and reports, playground runs, notes, reply templates, and the
caches prompts are built from. Checked generically: every model of the app registry with a
char, text or JSON field, a real knowledge search for each identifier, every cache entry — and
the prompt of a real turn after the erasure (the scripted OpenAI-compatible server records it,
the system message included)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.test import Client as WebClient
from django.urls import reverse

from apps.accounts.models import Role as StaffRole
from apps.conversations.models import Conversation, Role
from apps.conversations.services import conversation_create, message_append
from apps.escalations.models import ReplyTemplate
from apps.insights.models import InsightProposal, InsightRun, ProposalKind
from apps.knowledge import retrieval
from apps.knowledge.models import Article, ArticleChunk
from apps.knowledge.services.articles import article_create
from apps.notes.models import NoteSource, NoteType
from apps.notes.selectors import relevant_notes
from apps.notes.services import note_add
from apps.playground.models import PlaygroundRun
from apps.privacy.identifiers import MARKER
from apps.privacy.models import DataSubjectRequest, MatchKind
from apps.privacy.selectors import SubjectMatch
from apps.privacy.services import subject_erase
from apps.simulations.models import CaseRun, SimCase, SimulationRun
from tests.conftest import api_for
from tests.factories import MembershipFactory
from tests.privacy.conftest import EMAIL, NAME, VISITOR, Customer, rows_holding, staff_key
from tests.support.shop import Chat, assess

pytestmark = pytest.mark.django_db

ORDER = "TH-12345"
PHONE = "+44 7700 900123"
ADDRESS = "12 Rose Lane"
IDENTIFIERS = [NAME, EMAIL, ADDRESS, ORDER, PHONE, VISITOR]
# Rows that may still hold an identifier after the erasure, with the reason. Empty: none may.
ALLOWLIST: dict[str, str] = {}
# Shared text around the identifiers that must survive the redaction.
GENERAL = "Refunds reach the card within five working days"


def quote() -> str:
    return f"{NAME} ({EMAIL}, {PHONE}) of {ADDRESS}, Leeds asked about order {ORDER}."


def seed_everywhere(customer: Customer) -> None:
    """The customer's identifiers in every store that keeps text beside their conversations."""
    client = customer.client
    conv = customer.conversations[0]
    text = f"Please call me on {PHONE}, I live at {ADDRESS}, Leeds"
    message_append(client=client, conversation=conv, role=Role.USER, text=text)
    customer.texts.append(text)
    article_create(
        client=client,
        data={"kind": "article", "title": "Refund timing", "body": f"{GENERAL}. {quote()}"},
    )
    article_create(
        client=client,
        data={"kind": "faq", "title": f"Where is the refund of {NAME}?", "body": GENERAL},
    )
    article_create(
        client=client, data={"kind": "article", "title": f"Refund for {NAME}", "body": GENERAL}
    )
    InsightRun.objects.create(
        client=client,
        window_start=conv.created_at,
        window_end=conv.created_at,
        found={"topics": [{"title": "Refunds", "examples": [quote()]}]},
    )
    InsightProposal.objects.create(
        client=client,
        kind=ProposalKind.FAQ,
        title="Refund questions",
        topic_key="refund-questions",
        count=1,
        question=f"When does {NAME} get the refund?",
        answer=f"{GENERAL}. {quote()}",
    )
    SimCase.objects.create(
        client=client, name="refund-from-leeds", description=quote(), turns=[{"customer": quote()}]
    )
    run = SimulationRun.objects.create(client=client, name="nightly", report={"notes": quote()})
    CaseRun.objects.create(
        client=client, run=run, case_name="refund-from-leeds", transcript=[{"customer": quote()}]
    )
    PlaygroundRun.objects.create(client=client, mode="adaptive", question=quote())
    note_add(
        client=client,
        type=NoteType.TIP,
        content=f"{NAME} of {ADDRESS} gets free returns on order {ORDER}",
        source=NoteSource.STAFF,
    )
    ReplyTemplate.objects.create(
        client=client, name="Leeds refund", shortcut="leeds-refund", body=f"Dear {NAME}, {GENERAL}"
    )
    # Warm the caches prompts read: the knowledge topics (the FAQ's title) and the notes.
    assert any(NAME in t for t in retrieval.topics(client=client))
    relevant_notes(client=client, language="en")


def cached_values() -> list[str]:
    """Every value in the (local-memory) cache, as text."""
    store = getattr(cache, "_cache", {})
    found = []
    for value in list(store.values()):
        try:
            found.append(repr(pickle.loads(value)))  # noqa: S301 (the test's own cache)
        except Exception:
            found.append(repr(value))
    return found


def search_hits(client: Any, needle: str) -> list[str]:
    return [
        f"{h.title} | {h.heading} | {h.text}"
        for h in retrieval.search(client=client, query=needle, limit=20)
    ]


def erase(customer: Customer, **kwargs: Any) -> Any:
    return subject_erase(
        client=customer.client,
        match=SubjectMatch(MatchKind.EMAIL, EMAIL),
        channel="command",
        **kwargs,
    )


def test_every_store_holds_the_customer_before_the_erasure(customer_a: Customer) -> None:
    """Without this the checks below could pass on an empty database."""
    seed_everywhere(customer_a)
    hits = rows_holding(IDENTIFIERS)
    for label in (
        "knowledge.Article",
        "knowledge.ArticleChunk",
        "insights.InsightRun",
        "insights.InsightProposal",
        "simulations.SimCase",
        "simulations.SimulationRun",
        "simulations.CaseRun",
        "playground.PlaygroundRun",
        "notes.Note",
        "escalations.ReplyTemplate",
        "tools.ToolExecution",
        "conversations.Message",
    ):
        needles = {"tools.ToolExecution": (ORDER,), "escalations.ReplyTemplate": (NAME,)}
        for needle in needles.get(label, (NAME, ADDRESS)):
            assert any(h.startswith(label + ".") and repr(needle.lower()) in h for h in hits), (
                label,
                needle,
            )
    for needle in (NAME, ORDER, PHONE, ADDRESS):
        assert any(needle in hit for hit in search_hits(customer_a.client, needle)), needle
    assert any(NAME in value for value in cached_values())


def test_erasure_reaches_every_copy_and_keeps_shared_content(
    customer_a: Customer, customer_b: Customer
) -> None:
    seed_everywhere(customer_a)
    client = customer_a.client
    b_before = rows_holding([EMAIL, VISITOR], skip_client=client)

    result = erase(customer_a)

    left = [
        hit
        for hit in rows_holding(IDENTIFIERS, skip_client=customer_b.client)
        if hit.split(" #")[0] not in ALLOWLIST
    ]
    assert left == []
    for needle in IDENTIFIERS:
        assert not [h for h in search_hits(client, needle) if needle.lower() in h.lower()]
        assert not [v for v in cached_values() if needle.lower() in v.lower()], needle

    # Shared content is redacted, not deleted, and indexed again from the redacted text.
    article = Article.objects.for_client(client).get(title="Refund timing")
    assert GENERAL in article.body and MARKER in article.body and "Leeds" in article.body
    assert article.indexed_hash == article.content_hash
    chunks = " ".join(
        ArticleChunk.objects.for_client(client)
        .filter(article=article)
        .values_list("text", flat=True)
    )
    assert MARKER in chunks and GENERAL in chunks
    assert [h.title for h in search_hits(client, "refunds working days")]
    faq = Article.objects.for_client(client).get(kind="faq")
    assert faq.title == f"Where is the refund of {MARKER}?"
    assert any(MARKER in t for t in retrieval.topics(client=client))
    assert ReplyTemplate.objects.for_client(client).get().body == f"Dear {MARKER}, {GENERAL}"
    assert result.counts["knowledge.Article redacted"] == 3

    # What it could not erase is said, in the result and the record.
    codes = {item["code"]: item for item in result.not_erased}
    assert set(codes) == {"emails_sent", "llm_provider", "tool_backends"}
    assert codes["tool_backends"]["rows"] == 1 and codes["emails_sent"]["rows"] == 2
    assert result.request is not None and result.request.not_erased == result.not_erased
    for item in result.not_erased:
        for needle in IDENTIFIERS:
            assert needle.lower() not in str(item).lower()

    # The other business's customer with the same address is untouched.
    assert rows_holding([EMAIL, VISITOR], skip_client=client) == b_before != []


def test_a_dry_run_redacts_nothing(customer_a: Customer) -> None:
    seed_everywhere(customer_a)
    dry = erase(customer_a, dry_run=True)
    assert dry.counts["knowledge.Article redacted"] == 3
    assert NAME in Article.objects.for_client(customer_a.client).get(kind="faq").title
    assert erase(customer_a).counts == dry.counts


def test_identifiers_staff_add_are_erased_too(customer_a: Customer) -> None:
    """A nickname in words no shape recognises: staff name it, the erasure redacts it."""
    client = customer_a.client
    SimCase.objects.create(client=client, name="nick", description="Ask Zee Quillie about poles")
    erase(customer_a, identifiers=["Zee Quillie"])
    assert SimCase.objects.for_client(client).get(name="nick").description == (
        f"Ask {MARKER} about poles"
    )


def test_an_unconfirmed_match_of_the_address_is_not_swept(customer_a: Customer) -> None:
    """Someone else typed the same address: their conversation is left alone entirely."""
    client = customer_a.client
    stranger, _ = conversation_create(client=client)
    Conversation.objects.for_client(client).filter(pk=stranger.pk).update(contact_email=EMAIL)
    message_append(
        client=client, conversation=stranger, role=Role.USER, text=f"I am {EMAIL}, not Zora"
    )
    result = erase(customer_a)
    assert [u["id"] for u in result.unconfirmed] == [str(stranger.public_id)]
    stranger.refresh_from_db()
    assert stranger.contact_email == EMAIL
    assert stranger.messages.get(role=Role.USER).text == f"I am {EMAIL}, not Zora"


def test_a_prompt_built_after_the_erasure_holds_none_of_it(
    customer_a: Customer, llm: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """A real turn of another customer, through the openai SDK against the scripted server:
    before the erasure its prompt carries the customer (the FAQ's title among the knowledge
    topics, the note); after it, no identifier, in no message, the system message included."""
    seed_everywhere(customer_a)
    client = customer_a.client

    def prompt_of_a_new_turn() -> str:
        conv, _ = conversation_create(client=client)
        llm.reset()
        llm.script("assess", assess(response="Refunds take five working days.", confidence=9))
        Chat(client, conv, django_capture_on_commit_callbacks).say(
            "Hello, how long does a refund take for returns?"
        )
        calls = llm.calls()
        assert calls, "no LLM call was made"
        return "\n".join(
            f"{m.get('role')}: {m.get('content')}" for call in calls for m in call.messages
        )

    before = prompt_of_a_new_turn()
    assert NAME in before  # the test can fail: the prompt did carry the customer

    erase(customer_a)

    after = prompt_of_a_new_turn()
    for needle in IDENTIFIERS:
        assert needle.lower() not in after.lower(), needle
    assert "system:" in after


def test_api_and_admin_say_what_was_not_erased_and_take_extra_identifiers(
    customer_a: Customer, customer_b: Customer
) -> None:
    client = customer_a.client
    SimCase.objects.create(client=client, name="nick", description="Ask Zee Quillie about poles")
    api = api_for(staff_key(client))
    dry = api.post(
        "/api/v1/privacy/requests/",
        {"kind": "erase", "email": EMAIL, "dry_run": True},
        format="json",
    )
    assert {i["code"] for i in dry.json()["not_erased"]} == {
        "emails_sent",
        "llm_provider",
        "tool_backends",
    }

    # Another client's key with the same address and identifier: its own customer only.
    other = api_for(staff_key(customer_b.client)).post(
        "/api/v1/privacy/requests/",
        {"kind": "erase", "email": EMAIL, "identifiers": ["Zee Quillie"]},
        format="json",
    )
    assert other.status_code == 201
    assert SimCase.objects.for_client(client).get(name="nick").description.startswith("Ask Zee")
    assert rows_holding([NAME], skip_client=customer_b.client)

    user = MembershipFactory(client=client, role=StaffRole.ADMIN).user
    user.user_permissions.add(*Permission.objects.all())
    web = WebClient()
    web.force_login(user)
    find = reverse("admin:privacy_datasubjectrequest_find")
    form = {"client": client.pk, "match_kind": "email", "value": EMAIL}
    page = web.post(find, form, headers={"Accept-Language": "es"}).content.decode()
    assert 'id="privacy-not-erased"' in page and "el proveedor del LLM" in page
    web.post(find, {**form, "action": "erase", "confirm": "yes", "identifiers": "Zee Quillie\n"})
    assert SimCase.objects.for_client(client).get(name="nick").description == (
        f"Ask {MARKER} about poles"
    )
    record = DataSubjectRequest.objects.for_client(client).get()
    shown = web.get(
        reverse("admin:privacy_datasubjectrequest_change", args=[record.pk])
    ).content.decode()
    assert "your back-office (the tools&#x27; webhooks)" in shown
