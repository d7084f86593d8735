"""Replies shown while the model writes them: the turn decides from the deciding fields (asked
for before `response`) whether the reply goes out as written; if so the text so far is kept
for the widget's `delta` events (apps.conversations.reply_drafts)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from apps.conversations import reply_drafts
from apps.conversations.services import conversation_create
from apps.reasoning.models import ReasoningTrace
from devtools.fake_llm import Truncated, assess_reply
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat

ANSWER = "We're open from eight to six on weekdays and from ten to four on Saturdays."


def ordered_assess(**fields: Any) -> dict[str, Any]:
    """An assessment written in the order the schema asks for: the reply text last."""
    return assess_reply(**({"response": ANSWER} | fields))


@pytest.fixture
def drafts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, str]]:
    """Every reply draft a turn writes (conversation, turn, text), as it writes it."""
    written: list[tuple[int, int, str]] = []
    write = reply_drafts.reply_draft_write

    def recording(*, conversation_id: int, turn_id: int, text: str) -> None:
        written.append((conversation_id, turn_id, text))
        write(conversation_id=conversation_id, turn_id=turn_id, text=text)

    monkeypatch.setattr(reply_drafts, "reply_draft_write", recording)
    monkeypatch.setattr(reply_drafts, "MIN_INTERVAL_SECONDS", 0)
    return written


def test_a_confident_answer_without_a_tool_is_written_word_by_word(chat: Chat, llm, drafts):
    llm.script("assess", ordered_assess())

    [reply] = chat.say("When are you open?")

    assert reply.text == ANSWER
    assert llm.requests[0].body["stream"] is True
    texts = [text for _, _, text in drafts]
    assert len(texts) > 5
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == ANSWER
    trace = ReasoningTrace.objects.get(user_message__conversation=chat.conversation)
    assert {(c, t) for c, t, _ in drafts} == {(chat.conversation.pk, trace.pk)}
    # The turn is over: its draft is gone, so no stream shows it again.
    assert reply_drafts.reply_draft_read(chat.conversation.pk) is None


def test_the_standard_modes_answer_is_written_word_by_word(
    standard_shop, llm, drafts, django_capture_on_commit_callbacks
):
    conversation = conversation_create(client=standard_shop)[0]
    llm.script("respond", {"tool_call": None, "tool_params": {}, "response": ANSWER})
    [reply] = Chat(standard_shop, conversation, django_capture_on_commit_callbacks).say("Hours?")
    assert reply.text == ANSWER
    assert [text for _, _, text in drafts][-1] == ANSWER


@pytest.mark.parametrize(
    ("why", "reply"),
    [
        (
            "a tool call",
            ordered_assess(tool_call="get_order_status", tool_params={"order_id": "TH-12345"}),
        ),
        ("low confidence", ordered_assess(confidence=5)),
        ("more context wanted", ordered_assess(needs_more_context=["policies.returns"])),
        ("missing params", ordered_assess(missing_params=["order_id"])),
        # A provider that writes the reply first: the decision is not known in time.
        (
            "reply first",
            {"response": ANSWER, **{k: v for k, v in ordered_assess().items() if k != "response"}},
        ),
    ],
)
def test_a_reply_something_may_still_change_is_not_shown_early(
    chat: Chat, llm, webhook, drafts, why, reply
):
    llm.script("assess", reply)
    llm.default("assess", ordered_assess(response="Could you tell me more?", confidence=8))
    llm.default(
        "critique", {"decision": "ASK_USER", "reasoning": "check", "message": "Which order?"}
    )
    llm.default("compose", {"response": "Your order is on its way."})
    webhook.default(Reply.ok({"status": "shipped"}))

    replies = chat.say("When are you open?")

    assert replies, why
    # Nothing of the reply that could still change was shown; what was shown (a later,
    # final assessment's reply) is exactly what the customer got.
    texts = [text for _, _, text in drafts]
    assert not [text for text in texts if ANSWER.startswith(text)], why
    assert all(any(r.text.startswith(text) for r in replies) for text in texts), why


def test_a_plan_that_evaluates_its_drafts_shows_no_draft(chat: Chat, llm, drafts):
    plan = chat.client.plan
    plan.evaluation_enabled = True
    plan.save()
    llm.script("assess", ordered_assess())
    llm.default(
        "evaluate",
        {"valid": True, "improved_response": None, "improved_confidence": 90, "evaluation": "ok"},
    )
    chat.say("When are you open?")
    assert drafts == []
    assert "stream" not in llm.requests[0].body


def test_streaming_can_be_switched_off(chat: Chat, llm, drafts, settings):
    settings.LLM_STREAM_REPLIES = False
    llm.script("assess", ordered_assess())
    [reply] = chat.say("When are you open?")
    assert reply.text == ANSWER
    assert drafts == [] and "stream" not in llm.requests[0].body


def test_the_offline_demo_model_writes_word_by_word_too(chat: Chat, drafts, settings):
    settings.OPENAI_API_KEY = ""  # the offline demo model answers
    replies = chat.say("Hello! Who are you?")

    texts = [text for _, _, text in drafts]
    assert len(texts) > 3
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == replies[-1].text


def test_a_reply_shown_by_an_attempt_that_failed_is_taken_back(chat: Chat, llm, webhook, drafts):
    """The first attempt is cut off after its text was shown: the text is taken back (an empty
    draft) and the retry, which calls a tool, shows none of its own."""
    written = json.dumps(ordered_assess())
    llm.script(
        "assess",
        Truncated(written[:-20]),
        ordered_assess(
            response="Let me look.",
            tool_call="get_order_status",
            tool_params={"order_id": "TH-12345"},
        ),
    )
    llm.default("compose", {"response": "Order TH-12345 has shipped."})
    webhook.default(Reply.ok({"status": "shipped"}))

    [reply] = chat.say("Where is TH-12345?")

    assert reply.text == "Order TH-12345 has shipped."
    texts = [text for _, _, text in drafts]
    assert texts and texts[-1] == ""
    assert all(ANSWER.startswith(text) for text in texts)
