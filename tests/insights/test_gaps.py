"""Knowledge gaps: turns whose knowledge search found nothing become evidence; a topic with such
turns becomes a "missing article" proposal; staff draft the article (a DRAFT, never in a
prompt), and only approval publishes it. The model is the scripted OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role as MemberRole
from apps.conversations.models import Conversation, Role
from apps.conversations.services import conversation_create, message_append
from apps.core.exceptions import ApplicationError
from apps.escalations.services import escalation_create
from apps.insights.models import InsightProposal, ProposalKind, ProposalStatus
from apps.insights.selectors import insight_evidence
from apps.insights.services import (
    generate_insights,
    proposal_approve,
    proposal_draft_article,
    proposal_reject,
)
from apps.knowledge.models import Article, ArticleKind, ArticleStatus
from apps.knowledge.selectors import search_chunks
from apps.knowledge.services.articles import article_save
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from tests.factories import MembershipFactory
from tests.insights.conftest import escalated, ref, window
from tests.insights.test_insights import norway_topic
from tests.support.shop import make_shop

pytestmark = pytest.mark.django_db

RENTALS = [
    "Can I rent a kayak for the weekend?",
    "do you rent kayaks",
    "How much is a kayak rental per day?",
]
DRAFT = "Yes, we rent kayaks from our Denver store."


def searched(client: Any, text: str, *hits: dict[str, Any], query: str = "") -> Conversation:
    """A conversation turn whose knowledge search (the `knowledge` trace step) found `hits`."""
    conv, _ = conversation_create(client=client)
    message = message_append(client=client, conversation=conv, role=Role.USER, text=text)
    trace = ReasoningTrace.objects.create(
        client=client, conversation=conv, user_message=message, mode="standard"
    )
    ReasoningStep(
        client=client,
        trace=trace,
        index=0,
        name="knowledge",
        input_summary=query or text,
        output={"query": query or text, "purpose": "message", "hits": list(hits), "tokens": 0},
    ).save()
    return conv


def hit(score: float) -> dict[str, Any]:
    return {"article": "a1", "chunk": 0, "title": "Renting gear", "score": score}


def kayak_topic(ids: list[str]) -> dict[str, Any]:
    return norway_topic(ids) | {
        "title": "Kayak rentals",
        "proposal": {
            "kind": "faq",
            "question": "Do you rent kayaks?",
            "answer": DRAFT,
            "note_type": "",
            "content": "",
        },
    }


def propose_gap(llm: Any, client: Any) -> tuple[InsightProposal, list[Conversation]]:
    convs = [searched(client, text) for text in RENTALS]
    llm.script("insights", {"topics": [kayak_topic([ref(c) for c in convs])]})
    since, until = window()
    [proposal] = generate_insights(client=client, since=since, until=until).proposals
    return proposal, convs


def test_turns_whose_search_found_nothing_above_the_threshold_are_evidence(shop, settings):
    settings.INSIGHTS_KNOWLEDGE_MIN_SCORE = 0.2
    empty = searched(shop, "Can I rent a kayak?")
    weak = searched(shop, "Do you sell bike racks?", hit(0.05), hit(0.1))
    searched(shop, "How long do returns take?", hit(0.05), hit(0.9))  # answered: not a gap
    # A turn with no knowledge step (no knowledge base, or it never searched): not a gap.
    conv, _ = conversation_create(client=shop)
    message_append(client=shop, conversation=conv, role=Role.USER, text="Hello there")

    items = insight_evidence(client=shop, since=window()[0], until=window()[1])
    gaps = {i.conversation: i for i in items if i.kind == "no_knowledge"}
    assert set(gaps) == {str(empty.public_id), str(weak.public_id)}
    assert gaps[str(empty.public_id)].text == "Can I rent a kayak?"
    assert "found nothing for" in gaps[str(empty.public_id)].detail
    assert "best 0.1" in gaps[str(weak.public_id)].detail


def test_another_clients_gaps_are_not_read(shop, webhook):
    other = make_shop("standard", webhook.url(), slug="other-shop")
    searched(other, "Can I rent a kayak?")
    items = insight_evidence(client=shop, since=window()[0], until=window()[1])
    assert [i for i in items if i.kind == "no_knowledge"] == []


def test_a_gap_topic_becomes_a_missing_article_proposal(llm, shop):
    convs = [searched(shop, text) for text in RENTALS]
    norway = [escalated(shop, "Do you ship to Norway?"), escalated(shop, "Ship to Oslo?")]
    llm.script(
        "insights",
        {"topics": [kayak_topic([ref(c) for c in convs]), norway_topic([ref(c) for c in norway])]},
    )
    result = generate_insights(client=shop, since=window()[0], until=window()[1])

    [call] = llm.calls("insights")
    assert "no_knowledge" in call.prompt_text and "do you rent kayaks" in call.prompt_text
    assert result.run.found == {"no_knowledge": 3, "escalation": 2}
    by_kind = {p.kind: p for p in result.proposals}
    # Norway had no knowledge gap: it stays an FAQ proposal.
    assert set(by_kind) == {ProposalKind.ARTICLE, ProposalKind.FAQ}
    article = by_kind[ProposalKind.ARTICLE]
    assert article.title == "Kayak rentals" and article.count == 3
    assert sorted(article.questions) == sorted(RENTALS)  # the customers' words, from the data
    assert DRAFT in article.outline and "[" in article.outline
    for question in RENTALS:
        assert f"- {question}" in article.outline
    assert article.article is None and article.status == ProposalStatus.PENDING_REVIEW


def test_a_later_run_adds_its_questions_to_the_pending_proposal(llm, shop):
    proposal, convs = propose_gap(llm, shop)
    more = [searched(shop, "Kayak hire near Denver?"), searched(shop, "rent a canoe or kayak")]
    llm.script("insights", {"topics": [kayak_topic([ref(c) for c in [*more, convs[0]]])]})
    since, until = window(days=2)
    [again] = generate_insights(client=shop, since=since, until=until).proposals
    assert again.pk == proposal.pk and again.count == 5
    assert {"Kayak hire near Denver?", "rent a canoe or kayak"} <= set(again.questions)


def test_draft_then_publish_only_on_approval(llm, shop):
    proposal, _ = propose_gap(llm, shop)
    with pytest.raises(ApplicationError, match="Draft the article first"):
        proposal_approve(client=shop, proposal=proposal)

    draft = proposal_draft_article(client=shop, proposal=proposal)
    assert draft.status == ArticleStatus.DRAFT and draft.kind == ArticleKind.ARTICLE
    assert draft.title == "Kayak rentals" and draft.body == proposal.outline.strip()
    assert proposal_draft_article(client=shop, proposal=proposal).pk == draft.pk  # once
    proposal.refresh_from_db()
    assert proposal.article_id == draft.pk and proposal.status == ProposalStatus.PENDING_REVIEW
    # A draft reaches no prompt: not usable, not found by the search.
    assert not Article.objects.for_client(shop).usable().filter(pk=draft.pk).exists()
    assert search_chunks(client=shop, query="kayak rentals Denver") == []

    # Still the outline's [placeholders]: refused.
    with pytest.raises(ApplicationError, match="placeholder"):
        proposal_approve(client=shop, proposal=proposal)
    draft.body = "## Kayak rentals\nWe rent sit-on-top kayaks from our Denver store, $45 a day."
    article_save(article=draft)

    approved = proposal_approve(client=shop, proposal=proposal)
    draft.refresh_from_db()
    assert approved.status == ProposalStatus.APPROVED
    assert draft.status == ArticleStatus.PUBLISHED and draft.approved_at is not None
    hits = search_chunks(client=shop, query="kayak rentals Denver")
    assert hits and {h.article_id for h in hits} == {draft.pk}


def test_rejecting_leaves_the_draft_unpublished(llm, shop):
    proposal, _ = propose_gap(llm, shop)
    draft = proposal_draft_article(client=shop, proposal=proposal)
    proposal_reject(client=shop, proposal=proposal, comment="we do not rent kayaks")
    draft.refresh_from_db()
    assert draft.status == ArticleStatus.DRAFT
    with pytest.raises(ApplicationError, match="already rejected"):
        proposal_draft_article(client=shop, proposal=proposal)


def test_only_missing_article_proposals_draft_articles(llm, shop):
    convs = [escalated(shop, "Do you ship to Norway?"), escalated(shop, "Ship to Oslo?")]
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    [faq] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals
    with pytest.raises(ApplicationError, match="missing-article"):
        proposal_draft_article(client=shop, proposal=faq)
    assert not Article.objects.for_client(shop).filter(kind=ArticleKind.ARTICLE).exists()


def test_another_client_cannot_draft_or_approve_a_proposal(llm, shop, webhook):
    other = make_shop("standard", webhook.url(), slug="other-shop")
    proposal, _ = propose_gap(llm, shop)
    with pytest.raises(ApplicationError) as error:
        proposal_draft_article(client=other, proposal=proposal)
    assert error.value.status == 404
    assert not Article.objects.unscoped("test checks the database directly").exists()


# -- the admin ---------------------------------------------------------------------------------


def _admin_user(client: Any, role: str) -> Any:
    user = MembershipFactory(client=client, role=role).user
    user.user_permissions.add(*Permission.objects.all())
    return user


def test_the_admin_drafts_the_article_and_links_it(client, llm, shop):
    proposal, _ = propose_gap(llm, shop)
    client.force_login(_admin_user(shop, MemberRole.ADMIN))
    url = reverse("admin:insights_insightproposal_change", args=[proposal.pk])
    page = client.get(url).content.decode()
    assert 'name="_draft"' in page and "do you rent kayaks" in page

    response = client.post(url, {"outline": proposal.outline, "_draft": "1"}, follow=True)
    assert response.status_code == 200
    proposal.refresh_from_db()
    assert proposal.article is not None and proposal.article.status == ArticleStatus.DRAFT
    page = response.content.decode()
    assert 'name="_draft"' not in page and "Kayak rentals" in page


def test_viewers_and_other_tenants_cannot_draft(client, llm, shop, webhook):
    other = make_shop("standard", webhook.url(), slug="other-shop")
    proposal, _ = propose_gap(llm, shop)
    list_url = "/admin/insights/insightproposal/"
    for user in (_admin_user(shop, MemberRole.VIEWER), _admin_user(other, MemberRole.OWNER)):
        client.force_login(user)
        client.post(
            list_url, {"action": "draft_article_selected", "_selected_action": [proposal.pk]}
        )
        client.post(
            reverse("admin:insights_insightproposal_change", args=[proposal.pk]),
            {"outline": "hijacked", "_draft": "1"},
        )
    proposal.refresh_from_db()
    assert proposal.article is None and proposal.outline != "hijacked"
    assert not Article.objects.unscoped("test checks the database directly").exists()


def test_a_hand_off_after_a_knowledge_search_is_a_gap_too(llm, shop):
    """The search found chunks (scores above the threshold) but the turn still ended with a
    person: the knowledge did not answer it. A hand-off without a search is no such evidence."""
    convs = [searched(shop, text, hit(3.5)) for text in RENTALS]
    for conv in convs:
        trace = ReasoningTrace.objects.for_client(shop).get(conversation=conv)
        escalation_create(
            client=shop, conversation=conv, reason="low_confidence", trace=trace, notify=False
        )
    plain = [escalated(shop, "Do you ship to Norway?"), escalated(shop, "Ship to Oslo?")]
    llm.script(
        "insights",
        {"topics": [kayak_topic([ref(c) for c in convs]), norway_topic([ref(c) for c in plain])]},
    )
    result = generate_insights(client=shop, since=window()[0], until=window()[1])

    assert result.run.found == {"escalation": 5}  # no `no_knowledge` item: the search found some
    [call] = llm.calls("insights")
    assert call.prompt_text.count("(after a knowledge search)") == 3
    kinds = {p.title: p.kind for p in result.proposals}
    assert kinds == {"Kayak rentals": ProposalKind.ARTICLE, "Shipping to Norway": ProposalKind.FAQ}
