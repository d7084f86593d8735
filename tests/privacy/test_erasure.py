"""Erasing a customer: after it, no row of any model holds their e-mail address, name, visitor
id or any of their messages — walked generically over every concrete model, so a model added
later fails here until erasure covers it — while the usage report for the period is unchanged
and another business's customer with the same address is untouched."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.utils import timezone

from apps.billing.models import UsageRecord
from apps.billing.selectors import usage_report
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.escalations.models import Escalation
from apps.insights.models import InsightProposal
from apps.notes.models import Note
from apps.privacy.models import DataSubjectRequest, ErasedConversation, MatchKind, RequestKind
from apps.privacy.selectors import SubjectMatch
from apps.privacy.services import ROOT_MODELS, SubjectNotFound, dependents, subject_erase
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from apps.tools.models import PendingAction, ToolExecution
from tests.privacy.conftest import EMAIL, NAME, VISITOR, Customer, rows_holding, walked_models

pytestmark = pytest.mark.django_db


def report_of(client: Client) -> dict[str, Any]:
    today = timezone.localdate()
    report = usage_report(client=client, start=today, end=today, group_by="mode")
    return dataclasses.asdict(report)


def erase(client: Client, kind: str = MatchKind.EMAIL, value: str = EMAIL, **kwargs: Any) -> Any:
    return subject_erase(
        client=client, match=SubjectMatch(kind, value), channel="command", **kwargs
    )


def test_the_customer_is_everywhere_before_erasure(customer_a: Customer) -> None:
    """The walk finds what it looks for: without this, an empty result proves nothing."""
    hits = rows_holding(customer_a.needles)
    for label in (
        "conversations.Conversation",
        "conversations.Message",
        "reasoning.ReasoningStep",
        "tools.ToolExecution",
        "escalations.Escalation",
        "notes.Note",
        "insights.InsightProposal",
        "playground.PlaygroundRun",
        "simulations.SimCase",
        "simulations.CaseRun",
        "simulations.SimulationRun",
    ):
        assert any(hit.startswith(label + ".") for hit in hits), label
    assert UsageRecord.objects.filter(client=customer_a.client).count() == 6


def test_erasure_leaves_no_trace_of_the_customer_and_billing_unchanged(
    customer_a: Customer, customer_b: Customer
) -> None:
    client = customer_a.client
    before = report_of(client)
    assert before["totals"]["turns"] == 3 and before["totals"]["billed_usd"] > 0
    records_before = list(
        UsageRecord.objects.filter(client=client)
        .order_by("pk")
        .values_list("pk", "prompt_tokens", "completion_tokens", "cost_usd", "billed_usd")
    )
    b_before = rows_holding(customer_b.needles, skip_client=client)

    result = erase(client)

    assert result.conversations == 2
    assert rows_holding(customer_a.needles, skip_client=customer_b.client) == []
    # Billing: every usage record and the report for the period, to the cent and the token.
    assert report_of(client) == before
    assert (
        list(
            UsageRecord.objects.filter(client=client)
            .order_by("pk")
            .values_list("pk", "prompt_tokens", "completion_tokens", "cost_usd", "billed_usd")
        )
        == records_before
    )
    # The other business's customer with the same address and visitor id is untouched.
    assert rows_holding(customer_b.needles, skip_client=client) == b_before != []
    b_conv = Conversation.objects.for_client(customer_b.client).get(
        pk=customer_b.conversations[0].pk
    )
    assert b_conv.contact_email == EMAIL and b_conv.visitor_id == VISITOR


def test_what_erasure_keeps_and_what_it_deletes(customer_a: Customer) -> None:
    client = customer_a.client
    conv = customer_a.conversations[0]
    traces = ReasoningTrace.objects.filter(conversation=conv).count()
    messages = Message.objects.filter(conversation=conv).count()

    result = erase(client)

    conv.refresh_from_db()
    assert conv.status == "closed" and conv.contact_email == "" and conv.visitor_id == ""
    assert conv.visitor_token_hash == ""
    # Shells with their figures, no content.
    assert Message.objects.filter(conversation=conv).count() == messages
    assert not Message.objects.filter(conversation=conv).exclude(text="").exists()
    assert ReasoningTrace.objects.filter(conversation=conv).count() == traces
    assert ReasoningStep.objects.filter(trace__conversation=conv).exclude(output={}).count() == 0
    [execution] = ToolExecution.objects.filter(client=client)
    assert execution.status == "succeeded" and execution.params == {} and execution.result is None
    assert not PendingAction.objects.filter(conversation=conv).exists()
    assert not Note.objects.filter(client=client).exists()
    escalation = Escalation.objects.get(conversation=conv)
    assert escalation.status == "resolved" and escalation.detail == ""
    proposal = InsightProposal.objects.get(client=client)
    assert proposal.conversation_ids == ["00000000-0000-0000-0000-000000000001"]
    assert proposal.count == 1 and proposal.questions == ["How long do refunds take?"]
    assert "refunds take 5 days" in proposal.outline
    assert ErasedConversation.objects.filter(client=client).count() == 2
    # The record: counts, never content.
    [record] = DataSubjectRequest.objects.filter(client=client)
    assert record == result.request
    assert record.kind == RequestKind.ERASE and record.conversations == 2
    assert (
        record.counts["conversations.Message"]
        == Message.objects.filter(conversation__in=customer_a.conversations).count()
    )
    assert record.match_digest == SubjectMatch(MatchKind.EMAIL, EMAIL.upper()).digest()
    assert EMAIL not in str(record.__dict__)


def test_dry_run_counts_exactly_and_changes_nothing(customer_a: Customer) -> None:
    client = customer_a.client
    dry = erase(client, dry_run=True)
    assert dry.dry_run and dry.request is None
    assert not DataSubjectRequest.objects.filter(client=client).exists()
    assert Conversation.objects.filter(client=client, contact_email__iexact=EMAIL).count() == 2
    assert rows_holding([NAME])
    real = erase(client)
    assert real.counts == dry.counts


def test_erasing_twice_is_harmless(customer_a: Customer) -> None:
    client = customer_a.client
    erase(client, MatchKind.CONVERSATION, str(customer_a.conversations[0].public_id))
    # The address is gone from the first conversation; the second still has it.
    second = erase(client)
    assert second.conversations == 1
    with pytest.raises(SubjectNotFound):
        erase(client)
    again = erase(client, MatchKind.CONVERSATION, str(customer_a.conversations[0].public_id))
    assert again.conversations == 1
    assert rows_holding(customer_a.needles) == []


def test_erase_by_visitor_id(customer_a: Customer) -> None:
    result = erase(customer_a.client, MatchKind.VISITOR, VISITOR)
    assert result.conversations == 1
    assert not Conversation.objects.filter(client=customer_a.client, visitor_id=VISITOR).exists()


def test_another_clients_conversation_id_is_not_found(
    customer_a: Customer, customer_b: Customer
) -> None:
    with pytest.raises(SubjectNotFound):
        erase(customer_b.client, MatchKind.CONVERSATION, str(customer_a.conversations[0].public_id))
    assert rows_holding([NAME], skip_client=customer_b.client)


def test_the_walk_covers_every_app() -> None:
    labels = {m._meta.app_label for m in walked_models()}
    assert {
        "conversations",
        "reasoning",
        "tools",
        "escalations",
        "notes",
        "insights",
        "simulations",
        "playground",
        "billing",
        "privacy",
        "knowledge",
        "accounts",
    } <= labels


# What erasure does to each model pointing at a conversation, message, trace, tool run, pending
# action, escalation, playground run or case run. A model added later fails the test below until
# it is listed here — after checking what erasure does to it (rows it does not handle are
# deleted; a model that must keep its rows, like usage for billing, goes in KEEP_ROWS).
DEPENDENTS = {
    "billing.ConversationVisitor": "deleted (a keyed hash of the visitor's address)",
    "billing.TurnAllowance": "deleted (a turn's hold on the visitor's daily budget)",
    "billing.UsageRecord": "kept: codes and figures only, for billing",
    "billing.UsageReservation": "kept: figures only",
    "conversations.ConversationRating": "comment emptied, score kept for past outcomes",
    "conversations.Message": "text and data emptied",
    "escalations.Escalation": "detail emptied, resolved",
    "flags.MessageFlag": "deleted (its correction may quote the customer)",
    "identity.EmailCodeChallenge": "deleted (the address a one-time code was sent to)",
    "insights.InsightProposal": "deleted when taught from the customer's message or flag",
    "mail.MailMessage": "addresses, headers, subject and text emptied; attachments deleted",
    "notes.Note": "deleted",
    "outcomes.ConversationResolution": "kept: resolved or not, and when (no customer data)",
    "playground.PlaygroundRun": "question, result and notes emptied",
    "privacy.ErasedConversation": "the erasure's own mark",
    "reasoning.ReasoningStep": "input summary, output and error emptied",
    "reasoning.ReasoningTrace": "payloads emptied, counters kept",
    "simulations.CaseRun": "transcript, checks and judge results emptied",
    "approvals.ApprovalRequest": "deleted (the exact params the customer confirmed)",
    "tools.PendingAction": "deleted",
    "tools.ToolExecution": "params, result and error emptied",
}


def test_every_model_pointing_at_a_customer_row_is_accounted_for() -> None:
    found = {rel.related_model._meta.label for root in ROOT_MODELS for rel in dependents(root)}
    assert found == set(DEPENDENTS), sorted(found ^ set(DEPENDENTS))
