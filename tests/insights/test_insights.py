"""Insights: what went wrong becomes proposals staff approve. The model is the scripted
OpenAI-compatible server (the real openai SDK talks to it) unless a test runs the offline demo."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.billing.models import UsageCounter, UsagePurpose, UsageRecord
from apps.billing.periods import month_start, today
from apps.core.exceptions import ApplicationError
from apps.insights.models import InsightProposal, InsightRun, ProposalStatus, RunStatus
from apps.insights.selectors import insight_evidence
from apps.insights.services import generate_insights, proposal_approve, proposal_reject
from apps.insights.tasks import schedule_nightly
from apps.knowledge.models import Article, ArticleKind, ArticleStatus
from apps.knowledge.selectors import faqs_for
from apps.reasoning import steps
from apps.reasoning.steps import insights as insights_step
from devtools.fake_llm import Fail, RecordedRequest
from tests.insights.conftest import escalated, questioned, ref, window
from tests.support.shop import assess, make_shop

pytestmark = pytest.mark.django_db

NORWAY = [
    "Do you ship to Norway?",
    "Can you deliver to Oslo in Norway?",
    "Is shipping to Norway possible, and how long does it take?",
]
ANSWER = "Yes: we ship to Norway in 5–7 working days; customs fees are paid on delivery."


def refs_in(request: RecordedRequest) -> list[str]:
    return re.findall(r"^\[([0-9a-f]{8,})\]", request.prompt_text, re.MULTILINE)


def norway_topic(ids: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "title": "Shipping to Norway",
        "count": 99,  # never trusted: recomputed from the data
        "conversation_ids": ids,
        "proposal": {
            "kind": "faq",
            "question": "Do you ship to Norway?",
            "answer": ANSWER,
            "note_type": "",
            "content": "",
        },
    } | extra


@pytest.fixture
def other_shop(db, webhook):
    return make_shop("adaptive", webhook.url(), slug="other-shop")


def test_repeated_escalations_become_one_faq_proposal_with_count_and_links(llm, shop, other_shop):
    mine = [escalated(shop, text) for text in NORWAY]
    gift = escalated(shop, "What is the balance on my gift card?")
    theirs = escalated(other_shop, "Do you ship to Norway? (the other shop)")
    given: list[list[str]] = []

    def reply(request: RecordedRequest) -> dict[str, Any]:
        given.append(refs_in(request))
        ids = [ref(c) for c in mine] + ["deadbeef", ref(theirs), ref(mine[0])]
        return {"topics": [norway_topic(ids)]}

    llm.script("insights", reply)
    since, until = window()
    result = generate_insights(client=shop, since=since, until=until)

    # One call, with the exact schema of the protocol; only this client's conversations in it.
    [call] = llm.calls("insights")
    topic_schema = call.json_schema["properties"]["topics"]["items"]
    assert set(topic_schema["properties"]) == {"title", "count", "conversation_ids", "proposal"}
    assert set(topic_schema["properties"]["proposal"]["properties"]) == {
        "kind",
        "question",
        "answer",
        "note_type",
        "content",
    }
    assert sorted(given[0]) == sorted(ref(c) for c in [*mine, gift])
    assert ref(theirs) not in call.prompt_text and "other shop" not in call.prompt_text
    assert "Do you ship to Norway?" in call.prompt_text

    [proposal] = result.proposals
    assert proposal.status == ProposalStatus.PENDING_REVIEW
    assert proposal.kind == "faq" and proposal.question == "Do you ship to Norway?"
    assert proposal.count == 3  # the model said 99
    assert sorted(proposal.conversation_ids) == sorted(str(c.public_id) for c in mine)
    run = result.run
    assert run.status == RunStatus.DONE and run.ids_dropped == 2 and run.proposals_created == 1
    assert run.found == {"escalation": 4} and run.items_sent == 4 and run.llm_calls == 1
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    [usage] = UsageRecord.objects.filter(client=shop, purpose=UsagePurpose.INSIGHTS)
    assert usage.step == "insights" and usage.conversation_id is None
    # Nothing reached the business info.
    shop.refresh_from_db()
    assert "faqs" not in shop.business_info or all(
        f["answer"] != ANSWER for f in shop.business_info["faqs"]
    )


def test_a_topic_supported_by_one_given_conversation_only_is_not_proposed(llm, shop, other_shop):
    mine = escalated(shop, NORWAY[0])
    escalated(shop, NORWAY[1])
    theirs = [escalated(other_shop, text) for text in NORWAY]
    # The model invents support from another tenant's conversations: dropped, and what is left
    # (one conversation) is under INSIGHTS_MIN_COUNT.
    llm.script("insights", {"topics": [norway_topic([ref(mine), *(ref(c) for c in theirs)])]})
    result = generate_insights(client=shop, since=window()[0], until=window()[1])
    assert result.proposals == [] and result.run.ids_dropped == 3
    assert not InsightProposal.objects.unscoped("test checks the database directly").exists()


def test_the_offline_demo_model_groups_deterministically(settings, shop):
    settings.OPENAI_API_KEY = ""
    convs = [escalated(shop, text) for text in NORWAY]
    escalated(shop, "I need to cancel order TH-12345")
    since, until = window()
    result = generate_insights(client=shop, since=since, until=until, dry_run=True)
    assert result.run.model == "offline-demo" and result.run.pk is None
    [proposal] = result.proposals
    assert proposal.title == "Shipping and delivery" and proposal.count == 3
    assert sorted(proposal.conversation_ids) == sorted(str(c.public_id) for c in convs)
    assert proposal.question in NORWAY and "[Offline demo draft" in proposal.answer
    assert (
        not InsightProposal.objects.unscoped("test checks the database directly").exists()
        and not InsightRun.objects.unscoped("test checks the database directly").exists()
    )
    # Same input, same grouping: the hint the run built, answered twice.
    items = [
        e.as_hint(e.conversation[:8])
        for e in insight_evidence(client=shop, since=since, until=until)
    ]
    hint = insights_step.hint(items=items, min_count=2, max_topics=5)
    assert insights_step.offline(hint) == insights_step.offline(json.loads(json.dumps(hint)))
    assert [t["title"] for t in insights_step.offline(hint)["topics"]] == ["Shipping and delivery"]


def test_questioned_and_low_confidence_answers_are_read(llm, shop, chat):
    llm.script("assess", assess(response="I think we might ship there?", confidence=3))
    chat.say("Do you deliver to Iceland?")
    questioned(shop, "Can I return a gift after 60 days?")
    items = insight_evidence(client=shop, since=window()[0], until=window()[1])
    kinds = {item.kind: item for item in items}
    assert kinds["low_confidence"].text == "Do you deliver to Iceland?"
    assert kinds["low_confidence"].detail == "confidence 3/10"
    assert kinds["questioned"].text == "Can I return a gift after 60 days?"
    assert "not in the policy" in kinds["questioned"].detail


def test_the_input_is_bounded_in_tokens(llm, shop, settings):
    settings.INSIGHTS_MAX_INPUT_TOKENS = 60
    for n in range(12):
        escalated(shop, f"Question number {n} about shipping to a faraway island " * 3)
    llm.script("insights", {"topics": []})
    run = generate_insights(client=shop, since=window()[0], until=window()[1]).run
    [call] = llm.calls("insights")
    assert run.items_sent + run.items_left_out == 12 and run.items_left_out > 0
    assert len(refs_in(call)) == run.items_sent
    item_lines = [line for line in call.prompt_text.splitlines() if line.startswith("[")]
    assert sum(len(line) for line in item_lines) / 4 <= 60 + run.items_sent


def test_nothing_reaches_a_customer_before_approval_and_an_approved_faq_does(llm, shop, chat):
    convs = [escalated(shop, text) for text in NORWAY]
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    [proposal] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals

    # Pending: the next turn that fetches the FAQs does not see it.
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["faqs"]),
        assess(response="Let me check with the team.", confidence=8),
    )
    chat.say("Do you ship to Norway?")
    assert ANSWER not in "\n".join(c.prompt_text for c in llm.calls())

    approved = proposal_approve(client=shop, proposal=proposal, actor=None)
    assert approved.status == ProposalStatus.APPROVED and approved.reviewed_at is not None
    shop.refresh_from_db()
    [faq] = Article.objects.for_client(shop).filter(kind=ArticleKind.FAQ, body=ANSWER)
    assert faq.title == "Do you ship to Norway?" and faq.status == ArticleStatus.PUBLISHED
    assert faq.approved_at is not None
    # The FAQs the business info carried became FAQ articles too, none lost.
    assert "faqs" not in shop.business_info
    assert {"question": "Do you ship abroad?", "answer": "Yes, to 30 countries."} in faqs_for(
        client=shop
    )

    before = len(llm.calls("assess"))
    llm.script(
        "assess",
        assess(confidence=5, needs_more_context=["faqs"]),
        assess(response=ANSWER, confidence=9),
    )
    replies = chat.say("Do you ship to Norway?")
    fetched = llm.calls("assess")[before + 1]
    assert ANSWER in fetched.prompt_text and "Q: Do you ship to Norway?" in fetched.prompt_text
    assert replies[-1].text == ANSWER


def test_an_invalid_faq_is_refused_with_the_field_and_stays_pending(llm, shop):
    convs = [escalated(shop, text) for text in NORWAY]
    placeholder = "We ship to Norway in [number of days] days."
    llm.script(
        "insights",
        {"topics": [norway_topic([ref(c) for c in convs])]},
    )
    [proposal] = generate_insights(client=shop, since=window()[0], until=window()[1]).proposals
    before = dict(shop.business_info)

    with pytest.raises(ApplicationError) as placeholder_error:
        proposal_approve(client=shop, proposal=proposal, answer=placeholder)
    assert "placeholder" in placeholder_error.value.extra["fields"]["answer"]
    with pytest.raises(ApplicationError) as too_long:
        proposal_approve(client=shop, proposal=proposal, answer="x" * 5001)
    assert set(too_long.value.extra["fields"]) == {"answer"}
    shop.refresh_from_db()
    proposal.refresh_from_db()
    assert shop.business_info == before and proposal.status == ProposalStatus.PENDING_REVIEW

    proposal_reject(client=shop, proposal=proposal, comment="we don't ship there")
    with pytest.raises(ApplicationError, match="already rejected"):
        proposal_approve(client=shop, proposal=proposal)
    shop.refresh_from_db()
    assert shop.business_info == before


def test_rerunning_a_window_makes_no_call_and_no_duplicate(llm, shop):
    convs = [escalated(shop, text) for text in NORWAY[:2]]
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    since, until = window()
    first = generate_insights(client=shop, since=since, until=until)
    again = generate_insights(client=shop, since=since, until=until)
    assert again.repeated and again.run.pk == first.run.pk
    assert len(llm.calls("insights")) == 1
    assert (
        InsightProposal.objects.unscoped("test checks the database directly").count() == 1
        and InsightRun.objects.unscoped("test checks the database directly").count() == 1
    )

    # A later, overlapping window finds the same topic with one more conversation: the open
    # proposal gets the new evidence instead of a twin.
    third = escalated(shop, NORWAY[2])
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in [*convs, third]])]})
    later = generate_insights(client=shop, since=since, until=until + timedelta(minutes=1))
    assert later.run.proposals_created == 0 and later.run.proposals_updated == 1
    [proposal] = InsightProposal.objects.unscoped("test checks the database directly").all()
    assert proposal.count == 3 and proposal.conversation_ids[0] == str(third.public_id)

    # Once decided, the topic comes back only with evidence newer than the decision.
    proposal_reject(client=shop, proposal=proposal)
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in [*convs, third]])]})
    generate_insights(client=shop, since=since, until=until + timedelta(minutes=2))
    assert InsightProposal.objects.unscoped("test checks the database directly").count() == 1


def test_a_failed_call_is_recorded_and_retried_by_the_next_run(llm, shop):
    convs = [escalated(shop, text) for text in NORWAY]
    llm.script("insights", Fail(status=500))
    since, until = window()
    failed = generate_insights(client=shop, since=since, until=until).run
    assert failed.status == RunStatus.FAILED and "server" in failed.error
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    retried = generate_insights(client=shop, since=since, until=until)
    assert retried.run.pk == failed.pk and retried.run.status == RunStatus.DONE
    assert len(retried.proposals) == 1


def test_a_refused_budget_makes_no_call_and_the_run_is_failed(llm, shop):
    shop.plan.monthly_token_budget = 1000
    shop.plan.save()
    UsageCounter.objects.create(client=shop, month=month_start(today()), tokens_used=1000)
    [escalated(shop, text) for text in NORWAY]
    run = generate_insights(client=shop, since=window()[0], until=window()[1]).run
    assert llm.calls("insights") == []
    assert run.status == RunStatus.FAILED and "usage limit" in run.error
    assert not InsightProposal.objects.unscoped("test checks the database directly").exists()
    assert (
        not UsageRecord.objects.unscoped("test checks the database directly")
        .filter(purpose=UsagePurpose.INSIGHTS)
        .exists()
    )


def test_a_window_with_nothing_wrong_makes_no_call(llm, shop):
    run = generate_insights(client=shop, since=window()[0], until=window()[1]).run
    assert run.status == RunStatus.DONE and run.found == {} and llm.calls() == []


def test_the_nightly_task_runs_every_client_and_one_failure_stops_nobody(llm, shop, other_shop):
    for client in (shop, other_shop):
        for text in NORWAY:
            escalated(client, text)
    # Yesterday's evidence: the nightly window is the last whole days before today.
    InsightRun.objects.unscoped("test checks the database directly").all().delete()
    from apps.escalations.models import Escalation

    Escalation.objects.unscoped("test checks the database directly").update(
        created_at=timezone.now() - timedelta(days=1)
    )

    def reply(request: RecordedRequest) -> Any:
        if "Trail Shop" in request.prompt_text and not getattr(reply, "failed", False):
            reply.failed = True
            return Fail(status=500)
        return {"topics": [norway_topic(refs_in(request))]}

    llm.default("insights", reply)
    assert schedule_nightly() == 2
    runs = {
        run.client_id: run
        for run in InsightRun.objects.unscoped("test checks the database directly").all()
    }
    assert {r.status for r in runs.values()} == {RunStatus.FAILED, RunStatus.DONE}
    assert InsightProposal.objects.unscoped("test checks the database directly").count() == 1
    entry = settings.CELERY_BEAT_SCHEDULE["insights-nightly"]
    from config.celery import app

    assert entry["task"] in app.tasks


def test_the_command_prints_the_proposals(llm, shop, capsys):
    convs = [escalated(shop, text) for text in NORWAY]
    from apps.escalations.models import Escalation

    Escalation.objects.unscoped("test checks the database directly").update(
        created_at=timezone.now() - timedelta(days=1)
    )
    llm.script("insights", {"topics": [norway_topic([ref(c) for c in convs])]})
    call_command("insights", "--client", shop.slug, "--days", "2", "--dry-run")
    out = capsys.readouterr().out
    assert "dry run" in out and "Shipping to Norway — 3 conversation(s)" in out
    assert "Q: Do you ship to Norway?" in out and str(convs[0].public_id) in out
    assert not InsightProposal.objects.unscoped("test checks the database directly").exists()
    with pytest.raises(CommandError, match="No client"):
        call_command("insights", "--client", "nope")


def test_the_insights_step_is_registered_with_the_protocol_fields():
    step = steps.get("insights")
    topics = step.schema["properties"]["topics"]
    assert step.schema["required"] == ["topics"] and topics["type"] == "array"
    assert topics["items"]["required"] == ["title", "count", "conversation_ids", "proposal"]
    assert topics["items"]["properties"]["proposal"]["properties"]["kind"]["enum"] == [
        "faq",
        "note",
    ]


def test_answers_the_evaluation_questioned_are_read_through_a_real_turn(
    llm, standard_shop, django_capture_on_commit_callbacks
):
    """The evaluation layer (evaluate step, seed's rules) questions two answers about gift
    wrapping; the nightly run reads both and proposes one FAQ."""
    from apps.clients.models import Plan
    from apps.conversations.services import conversation_create
    from tests.support.shop import Chat

    Plan.objects.filter(pk=standard_shop.plan_id).update(
        evaluation_enabled=True, evaluation_escalate_below=0
    )
    standard_shop.plan.refresh_from_db()
    draft = "Yes, we gift-wrap every order for free and add a handwritten card, " * 2
    asked = ["Do you offer gift wrapping?", "Can you gift wrap my order please?"]
    convs = []
    for text in asked:
        conv = conversation_create(client=standard_shop)[0]
        llm.script("respond", {"response": draft, "tool_call": None, "tool_params": {}})
        llm.script(
            "evaluate",
            {
                "valid": False,
                "improved_response": None,
                "improved_confidence": 0,
                "evaluation": "Gift wrapping is not in the business information.",
            },
        )
        Chat(standard_shop, conv, django_capture_on_commit_callbacks).say(text)
        convs.append(conv)

    items = insight_evidence(client=standard_shop, since=window()[0], until=window()[1])
    assert sorted(i.text for i in items if i.kind == "questioned") == sorted(asked)
    topic = norway_topic([ref(c) for c in convs]) | {"title": "Gift wrapping"}
    topic["proposal"] = topic["proposal"] | {
        "question": "Do you offer gift wrapping?",
        "answer": "We do not gift-wrap orders.",
    }
    llm.script("insights", {"topics": [topic]})
    [proposal] = generate_insights(
        client=standard_shop, since=window()[0], until=window()[1]
    ).proposals
    assert proposal.count == 2 and proposal.title == "Gift wrapping"
    assert "not in the business information" in llm.calls("insights")[0].prompt_text
