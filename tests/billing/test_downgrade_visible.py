"""A per-visitor or per-conversation limit that runs a deliberative plan's turn adaptive is never
silent: the trace records it (`deliberative_cap`), the conversation's debug view says so in
words on the turn, and the client's usage page counts the turns by reason."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.billing.services.visitors import conversation_visitor_record
from apps.conversations.services import conversation_create
from apps.reasoning.models import ReasoningTrace
from devtools.fake_llm import WithUsage
from tests.billing.test_visitor_limits import limits, reason_step
from tests.factories import set_deliberation
from tests.support.shop import Chat, assess, make_shop

pytestmark = pytest.mark.django_db

CAPPED_WORDS = (
    "The visitor's daily token budget had 3,000 of 7,000 tokens used or held, too little "
    "left for a deliberative turn, so this turn ran adaptive."
)


def deep(webhook: Any, slug: str) -> Any:
    client = make_shop("deliberative", webhook.url(), slug=slug)
    set_deliberation(client.plan_id, min_steps=1, max_steps=1, refinement_iterations=0)
    client.refresh_from_db()
    return client


@pytest.fixture
def downgraded(webhook, llm, settings, django_capture_on_commit_callbacks) -> Any:
    """A deliberative shop whose visitor's second turn no longer fits their daily budget."""
    settings.BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE = 5_000
    client = deep(webhook, "deep-visible")
    limits(client, deliberative_turns_per_hour=0, visitor_daily_token_budget=7_000)
    llm.default("reason_step", WithUsage(reason_step(), prompt_tokens=1_990, completion_tokens=10))
    llm.default(
        "synthesize", WithUsage(assess(response="Deep."), prompt_tokens=990, completion_tokens=10)
    )
    llm.default(
        "assess", WithUsage(assess(response="Quick."), prompt_tokens=90, completion_tokens=10)
    )
    conversation, _ = conversation_create(client=client)
    conversation_visitor_record(client=client, conversation=conversation, visitor="v" * 32)
    chat = Chat(client, conversation, django_capture_on_commit_callbacks)
    assert chat.say("first")[0].text == "Deep."  # 0 + 5,000 ≤ 7,000: deliberative
    assert chat.say("second")[0].text == "Quick."  # 3,000 + 5,000 > 7,000: adaptive
    return client, conversation


def test_the_trace_records_the_downgrade(downgraded):
    client, _conversation = downgraded
    trace = ReasoningTrace.objects.for_client(client).order_by("pk").last()
    assert trace is not None and trace.mode == "adaptive"
    capped = trace.steps.get(name="deliberative_cap").output
    assert (capped["reason"], capped["used"], capped["budget"]) == ("visitor_budget", 3_000, 7_000)


def test_the_debug_view_says_so_in_words(admin_client, downgraded):
    _client, conversation = downgraded
    page = admin_client.get(
        reverse("admin:conversations_conversation_change", args=[conversation.pk])
    ).content.decode()

    assert page.count("Ran adaptive instead of deliberative:") == 1  # the second turn only
    assert CAPPED_WORDS.replace("'", "&#x27;") in page


def test_the_usage_page_counts_the_downgraded_turns_by_reason(admin_client, downgraded, webhook):
    client, _conversation = downgraded
    other = deep(webhook, "deep-other")  # another tenant: none of this client's turns

    page = admin_client.get(reverse("admin:billing_client_usage", args=[client.pk]))
    other_page = admin_client.get(reverse("admin:billing_client_usage", args=[other.pk]))

    assert "1 turn ran adaptive instead of deliberative: visitor budget" in page.content.decode()
    assert "instead of deliberative" not in other_page.content.decode()


def test_the_usage_page_says_it_in_spanish(admin_client, downgraded):
    client, _conversation = downgraded
    page = admin_client.get(
        reverse("admin:billing_client_usage", args=[client.pk]), HTTP_ACCEPT_LANGUAGE="es"
    ).content.decode()
    assert (
        "1 turno se ejecutó en modo adaptativo en lugar de deliberativo: presupuesto del visitante"
    ) in page
