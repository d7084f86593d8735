"""Deliberative answers shown while they are written: the loop shows its progress, then the call
after which nothing can replace the answer streams it — the synthesis when no refinement
follows, the last improvement when it is the version kept. Nothing streams while a critique,
a refinement round, an evaluation, a tool call or a guard could still replace the answer, and a
text shown that is not the answer after all is taken back (an empty draft)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from apps.clients.deliberation import deliberation_settings_set
from apps.conversations import reply_drafts
from apps.reasoning.deliberation import refinement
from apps.reasoning.deliberation.refinement import Critique, Draft, FinalSpec
from devtools.fake_llm import Truncated
from tests.reasoning.test_deliberative import rc, step
from tests.reasoning.test_reply_streaming import ordered_assess
from tests.support.fake_webhook import Reply
from tests.support.shop import Chat, critique, make_shop

pytestmark = pytest.mark.django_db

SYNTHESIS = "Returns are accepted within 30 days of delivery, with the receipt."
IMPROVED = "Returns are accepted within 30 days of delivery; reply here and we start yours."
BETTER = "Sorry for the wait: returns are accepted within 30 days. Reply here to start one."


def chat_maker(mode: str, capture: Any, webhook: Any, llm: Any) -> Callable[[int], Chat]:
    """Makes a chat with a shop on `mode` whose deliberation has two steps and the given number
    of refinement rounds; the loop's two steps scripted."""

    def make(iterations: int) -> Chat:
        llm.default("reason_step", step(1, 0.85))
        llm.default("feedback", {"feedback": "keep it grounded"})
        client = make_shop(mode, webhook.url(), slug=f"{mode.replace('_', '-')}-stream-shop")
        plan = client.plan
        deliberation_settings_set(plan, refinement_iterations=iterations, min_steps=2, max_steps=2)
        plan.save()
        return Chat.new(client, capture)

    return make


@pytest.fixture
def deep(django_capture_on_commit_callbacks, webhook, llm) -> Callable[[int], Chat]:
    """A deliberative chat with `iterations` refinement rounds."""
    return chat_maker("deliberative", django_capture_on_commit_callbacks, webhook, llm)


def script_two_rounds(llm: Any, draft_score: int, improved_score: int) -> None:
    """The synthesis SYNTHESIS, then two refinement rounds: the critique of the draft scores
    `draft_score`, the critique of the first improvement (IMPROVED) `improved_score`, and the
    second improvement is BETTER."""
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))
    llm.script(
        "refine_critique", rc(draft_score, "with the receipt"), rc(improved_score, "start yours")
    )
    llm.script("improve", {"response": IMPROVED}, {"response": BETTER})


def streamed_steps(llm: Any) -> list[str]:
    return [r.step for r in llm.requests if r.body.get("stream")]


def grows_into(texts: list[str], answer: str) -> bool:
    """Several drafts, each the start of the next, the last the whole answer."""
    return (
        len(texts) > 3
        and all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
        and texts[-1] == answer
    )


def test_a_synthesis_no_refinement_follows_is_written_word_by_word(deep, llm, drafts):
    chat = deep(0)
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS
    assert grows_into(drafts, SYNTHESIS), drafts
    # The loop's calls came first and were not streamed: only the answer's call was.
    steps = [r.step for r in llm.requests]
    assert steps[-1] == "synthesize" and "reason_step" in steps
    assert streamed_steps(llm) == ["synthesize"]
    assert reply_drafts.reply_draft_read(chat.conversation.pk) is None  # gone once posted


def test_the_last_improvement_when_it_is_kept_is_written_word_by_word(deep, llm, drafts):
    chat = deep(2)
    # The first improvement scores better than the draft: the last one, which improves it,
    # is the version sent.
    script_two_rounds(llm, 60, 70)

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == BETTER
    assert grows_into(drafts, BETTER), drafts
    # Neither the synthesis nor the first improvement (a critique followed each) was shown.
    assert [r.step for r in llm.requests].count("improve") == 2
    assert streamed_steps(llm) == ["improve"]
    assert llm.requests[-1].body.get("stream") is True


def test_a_last_improvement_that_may_be_dropped_is_not_shown(deep, llm, drafts):
    chat = deep(2)
    # The first improvement scores worse than the draft: the best version is the draft, and
    # the last improvement (of the worse one) is dropped, so it may not be shown.
    script_two_rounds(llm, 70, 60)

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS
    assert drafts == []
    assert streamed_steps(llm) == []


def test_nothing_is_shown_when_the_critique_of_the_synthesis_may_stop_refinement(deep, llm, drafts):
    chat = deep(1)
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))
    llm.script("refine_critique", rc(95))  # good enough: the synthesis is the answer

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS
    assert drafts == [] and streamed_steps(llm) == []


@pytest.mark.parametrize(
    ("why", "synthesis"),
    [
        (
            "a tool call",
            ordered_assess(
                response=SYNTHESIS,
                tool_call="get_order_status",
                tool_params={"order_id": "TH-12345"},
            ),
        ),
        ("low confidence: a critique runs", ordered_assess(response=SYNTHESIS, confidence=5)),
        ("missing params", ordered_assess(response=SYNTHESIS, missing_params=["order_id"])),
        (
            "more context wanted",
            ordered_assess(response=SYNTHESIS, needs_more_context=["kb:returns policy"]),
        ),
        (
            "the reply written first: the decision comes too late",
            {
                "response": SYNTHESIS,
                **{k: v for k, v in ordered_assess().items() if k != "response"},
            },
        ),
    ],
)
def test_a_synthesis_something_may_still_change_is_not_shown(
    deep, llm, webhook, drafts, why, synthesis
):
    chat = deep(0)
    llm.script("synthesize", synthesis)
    llm.default("synthesize", ordered_assess(response="Could you tell me the order number?"))
    llm.default("critique", critique("ASK_USER", "Which order is it?"))
    llm.default("compose", {"response": "Your order is on its way."})
    webhook.default(Reply.ok({"status": "shipped"}))

    replies = chat.say("Can I still return my boots?")

    assert replies, why
    # Nothing of the answer that could still change was shown; what was shown (a later,
    # final synthesis) is exactly what the customer got.
    assert not [text for text in drafts if text and SYNTHESIS.startswith(text)], why
    assert all(any(r.text.startswith(text) for r in replies) for text in drafts), why


def test_a_plan_that_evaluates_its_answers_shows_no_deliberative_answer_early(deep, llm, drafts):
    chat = deep(0)
    plan = chat.client.plan
    plan.evaluation_enabled = True
    plan.save()
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))
    llm.default(
        "evaluate",
        {"valid": True, "improved_response": None, "improved_confidence": 90, "evaluation": "ok"},
    )

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS
    assert drafts == [] and streamed_steps(llm) == []


def test_a_shown_improvement_whose_call_then_failed_is_taken_back(deep, llm, drafts):
    """The last improvement is cut off twice after its text was shown: the text is taken back
    (an empty draft) and the answer is the best version refinement had (the synthesis)."""
    chat = deep(1)
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))
    llm.script("refine_critique", rc(60, "with the receipt"))
    cut = json.dumps({"response": BETTER})[:-12]
    llm.script("improve", Truncated(cut), Truncated(cut))

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS
    assert [text for text in drafts if text], "the improvement was shown while written"
    assert all(BETTER.startswith(text) for text in drafts)
    assert drafts[-1] == ""  # taken back: the widget drops it and shows the posted reply


def test_a_shown_answer_the_mode_then_replaced_is_taken_back(deep, llm, drafts, monkeypatch):
    """If a shown improvement were not the version kept after all, the mode takes it back
    before the turn goes on (the widget then shows only the posted reply)."""
    monkeypatch.setattr(refinement, "improvement_sent", lambda events, iteration: True)
    # …and the last improvement is asked for although its version scored lower (refinement
    # normally skips it: `_worse_than_best`).
    monkeypatch.setattr(refinement, "_worse_than_best", lambda events, critique: False)
    chat = deep(2)
    script_two_rounds(llm, 70, 60)

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS  # refinement kept the best-scoring version
    assert BETTER in drafts  # (shown, because the rule was broken on purpose)
    assert drafts[-1] == ""


# -- deliberate when needed ---------------------------------------------------------------------


@pytest.fixture
def when_needed(django_capture_on_commit_callbacks, webhook, llm) -> Callable[[int], Chat]:
    """A "deliberate when needed" chat with `iterations` refinement rounds."""
    return chat_maker("as_needed", django_capture_on_commit_callbacks, webhook, llm)


def test_when_needed_the_adaptive_draft_that_deliberates_is_never_shown_its_answer_is(
    when_needed, llm, drafts
):
    chat = when_needed(0)
    # Confident enough for adaptive mode to show it, not for this plan: it deliberates.
    chat.client.plan.deliberate_below_confidence = 8
    chat.client.plan.save()
    first = "Probably thirty days, I think."
    llm.script("assess", ordered_assess(response=first, confidence=7, complaint=False))
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == SYNTHESIS
    assert not [text for text in drafts if first.startswith(text)]
    assert grows_into(drafts, SYNTHESIS), drafts
    # (The assessment was asked as a stream too: its deciding fields said not to show it.)
    assert streamed_steps(llm) == ["assess", "synthesize"]


def test_when_needed_an_answer_nothing_can_send_into_deliberation_is_written_word_by_word(
    when_needed, llm, drafts
):
    chat = when_needed(0)
    llm.script("assess", ordered_assess(response=SYNTHESIS, confidence=9, complaint=False))

    [reply] = chat.say("How long do I have to return boots?")

    assert reply.text == SYNTHESIS
    assert grows_into(drafts, SYNTHESIS), drafts
    assert [r.step for r in llm.requests] == ["assess"]
    assert streamed_steps(llm) == ["assess"]


@pytest.mark.parametrize(
    ("why", "fields"),
    [
        ("a complaint: it deliberates", {"confidence": 9, "complaint": True}),
        ("no word on a complaint: it may deliberate", {"confidence": 9}),
        ("below the plan's threshold: it deliberates", {"confidence": 8, "complaint": False}),
    ],
)
def test_when_needed_a_draft_that_may_deliberate_is_not_shown(
    when_needed, llm, drafts, why, fields
):
    chat = when_needed(1)
    chat.client.plan.deliberate_below_confidence = 9
    chat.client.plan.save()
    first = "Probably thirty days, I think."
    llm.script("assess", ordered_assess(response=first, **fields))
    llm.default("synthesize", ordered_assess(response=SYNTHESIS))
    llm.default("refine_critique", rc(95))

    replies = chat.say("Can I still return my boots?")

    assert replies, why
    assert not [text for text in drafts if text and first.startswith(text)], why
    assert drafts == [], why


def test_when_needed_with_refinement_only_the_kept_last_improvement_is_shown(
    when_needed, llm, drafts
):
    chat = when_needed(1)
    llm.script("assess", ordered_assess(response="Maybe?", confidence=3))
    llm.script("synthesize", ordered_assess(response=SYNTHESIS))
    llm.script("refine_critique", rc(60, "with the receipt"))
    llm.script("improve", {"response": BETTER})

    [reply] = chat.say("Can I still return my boots?")

    assert reply.text == BETTER
    assert grows_into(drafts, BETTER), drafts
    assert streamed_steps(llm) == ["assess", "improve"]


# -- the rule, in plain Python ------------------------------------------------------------------


def events_scored(*scores: int) -> refinement.Events:
    """A draft and, for each score, its critique and (but for the last score) an improvement:
    the events just before the improvement `len(scores)` is made."""
    events: list[refinement.ReasoningState] = [Draft(text="v0")]
    for index, score in enumerate(scores):
        events.append(Critique("c", score, (), iteration=index + 1, of_iteration=index))
        if index < len(scores) - 1:
            events.append(FinalSpec(text=f"v{index + 1}", iteration=index + 1))
    return tuple(events)


@pytest.mark.parametrize(
    ("scores", "sent"),
    [
        ((60,), True),  # the draft is the best so far: its improvement is kept
        ((60, 70), True),
        ((60, 70, 70), True),  # a tie goes to the later version
        ((70, 60), False),  # the improvements went downhill: the draft is sent
        ((60, 80, 75), False),
    ],
)
def test_the_last_improvement_is_sent_exactly_when_best_version_keeps_it(scores, sent):
    events = events_scored(*scores)
    iteration = len(scores)
    assert refinement.improvement_sent(events, iteration) is sent
    after = (*events, FinalSpec(text="last", iteration=iteration))
    chosen, _ = refinement.best_version(after)
    assert (chosen.text == "last") is sent


def test_refine_uses_the_final_improver_only_for_a_last_improvement_it_keeps():
    calls: list[tuple[str, int]] = []

    def critic(state: Draft | FinalSpec, iteration: int) -> refinement.Verdict:
        return refinement.Verdict(score=[60, 70, 65][iteration - 1], issues=[], critique="c")

    def improver(name: str) -> refinement.Improver:
        def improve(state: Draft | FinalSpec, critique: Critique, iteration: int) -> str:
            calls.append((name, iteration))
            return f"v{iteration}"

        return improve

    def refine(iterations: int) -> refinement.Refined:
        calls.clear()
        return refinement.refine(
            "v0",
            iterations=iterations,
            stop_score=90,
            critic=critic,
            improver=improver("plain"),
            final_improver=improver("final"),
        )

    kept = refine(2)
    assert calls == [("plain", 1), ("final", 2)]
    assert kept.text == "v2"

    dropped = refine(3)
    # Critiques 60, 70, 65: version 2 scored below version 1, so the last improvement (of
    # version 2) would be dropped: it is not asked for, and the final improver is never used.
    assert calls == [("plain", 1), ("plain", 2)]
    assert dropped.text == "v1"
