"""Deliberative mode end to end through the real `openai` SDK against the scripted server: the
server-controlled loop (termination, feedback over the whole history, feedback injection),
synthesis, refinement, clarifying questions, guards, budgets, takeover, usage and telemetry."""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from typing import Any

import pytest

from apps.billing.models import UsageRecord
from apps.clients.deliberation import deliberation_settings_set
from apps.clients.models import Plan
from apps.clients.rubrics import SUPPORT
from apps.conversations.models import ConversationStatus, Kind, Message
from apps.conversations.services import conversation_create
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceKind
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.steps._shared import CONFIRMATION_RULE
from apps.tools.models import PendingAction
from devtools.fake_llm import Fail, message_text
from tests.factories import set_deliberation
from tests.reasoning.helpers import THREE_REFINEMENT_STATES
from tests.support.shop import Chat, assess, cancel_assess, critique, make_shop

pytestmark = pytest.mark.django_db

KEYS = [p["key"] for p in SUPPORT["principles"]]


def step(
    n: int, score: float, *, status: str = "continue", hypotheses: Any = None, **scores: float
) -> dict[str, Any]:
    values = dict.fromkeys(KEYS, score) | scores
    return {
        "content": f"reasoning {n}",
        "status": status,
        "scores": values,
        "rationale": f"rationale {n}",
        "hypotheses": hypotheses or [],
    }


def fb(n: int) -> dict[str, Any]:
    return {"feedback": f"feedback after step {n}: strengthen grounded"}


def rc(score: int, quote: str = "", kind: str = "missing_info") -> dict[str, Any]:
    issues = [{"quote": quote, "problem": "says too little", "kind": kind}] if quote else []
    return {"score": score, "issues": issues, "critique": f"critique scoring {score}"}


@pytest.fixture(autouse=True)
def seed_policy(settings):
    """These tests pin the seed's exact loop: feedback from the LLM after every step but the
    last, no stall rule. The cheaper defaults (the server's note on a step on course, the
    `stalled` stop) have their own tests (test_deliberation_cost.py)."""
    settings.REASONING_FEEDBACK_ON_COURSE_GAIN = None
    settings.REASONING_DELIBERATION_STOP_STALLED = False


@pytest.fixture
def deliberative_shop(db, webhook):
    client = make_shop("deliberative", webhook.url(), slug="deep-shop")
    plan = client.plan
    plan.multipliers = {**plan.multipliers, "deliberative": "2.5"}
    deliberation_settings_set(plan, refinement_iterations=2)
    plan.save()
    return client


@pytest.fixture
def deep_chat(deliberative_shop, django_capture_on_commit_callbacks) -> Chat:
    conversation = conversation_create(client=deliberative_shop)[0]
    return Chat(deliberative_shop, conversation, django_capture_on_commit_callbacks)


def names(trace: ReasoningTrace) -> list[str]:
    return list(trace.steps.order_by("index").values_list("name", flat=True))


def end_of(trace: ReasoningTrace) -> dict[str, Any]:
    return trace.steps.get(name="deliberation_end").output


def script_loop(llm: Any, scores: list[float]) -> None:
    llm.script("reason_step", *[step(n, s) for n, s in enumerate(scores, start=1)])
    llm.script("feedback", *[fb(n) for n in range(1, len(scores))])


def test_a_deliberative_plan_runs_its_own_mode() -> None:
    assert mode_that_runs("deliberative") == "deliberative"


def test_the_loop_runs_min_steps_then_stops_at_target_and_refines(deep_chat, llm):
    script_loop(llm, [0.9, 0.5, 0.6, 0.8])  # target reached at step 1, but MIN is 4
    llm.script("synthesize", assess(response="Returns are accepted within 30 days.", confidence=9))
    llm.script("refine_critique", rc(70, "Returns are accepted within 30 days."), rc(85))
    llm.script(
        "improve",
        {"response": "Returns are accepted within 30 days. Reply here to start one."},
        {"response": "Sorry for the trouble: returns are accepted within 30 days. Reply here."},
    )

    [reply] = deep_chat.say("Can I still return my jacket?")

    assert reply.text == "Sorry for the trouble: returns are accepted within 30 days. Reply here."
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.mode == "deliberative"
    assert [r.step for r in llm.requests] == [
        "reason_step",
        "feedback",
        "reason_step",
        "feedback",
        "reason_step",
        "feedback",
        "reason_step",
        "synthesize",
        "refine_critique",
        "improve",
        "refine_critique",
        "improve",
    ]
    end = end_of(trace)
    assert end["termination"] == "target_reached"
    assert (end["steps"], end["best_iteration"], end["final_score"]) == (4, 2, 0.8)
    # 4 reason steps + 3 feedback + synthesis + 1 + 2N refinement calls (N = 2)
    assert trace.llm_calls == 4 + 3 + 1 + 4
    steps = [s.output for s in trace.steps.filter(name="reason_step").order_by("index")]
    assert [(s["step"], s["max_steps"], s["mean"]) for s in steps] == [
        (1, 10, 0.9),
        (2, 10, 0.5),
        (3, 10, 0.6),
        (4, 10, 0.8),
    ]
    assert steps[0]["content"] == "reasoning 1" and steps[0]["rationale"] == "rationale 1"
    assert set(steps[0]["scores"]) == set(KEYS)
    feedback = [s.output for s in trace.steps.filter(name="feedback").order_by("index")]
    assert feedback[0] == {"step": 1, "feedback": fb(1)["feedback"]}
    # internal messages for staff; the customer sees only the answer
    internal = {m.kind for m in deep_chat.all(visibility="internal")}
    assert {"reasoning_step", "feedback", "refinement", "assessment"} <= internal


@pytest.mark.parametrize(
    ("plan_fields", "scores", "expected_steps", "termination"),
    [
        ({}, [0.2] * 10, 10, "max_steps"),  # MAX
        ({"max_steps": 6}, [0.2] * 6, 6, "max_steps"),
        ({}, [0.8, 0.8, 0.8, 0.8], 4, "target_reached"),  # MIN holds a high first score
        ({"min_steps": 1}, [0.8], 1, "target_reached"),
        (
            {"min_steps": 2, "target": 0.9},
            [0.5, 0.85, 0.95],
            3,
            "target_reached",
        ),
        ({"min_steps": 2, "max_steps": 2}, [0.1, 0.1], 2, "max_steps"),
    ],
)
def test_termination_table(deep_chat, llm, plan_fields, scores, expected_steps, termination):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0, **plan_fields)
    deep_chat.client.plan.refresh_from_db()
    script_loop(llm, scores)
    llm.script("synthesize", assess(response="Answer."))

    [reply] = deep_chat.say("A question that needs thought")

    assert reply.text == "Answer."
    end = end_of(ReasoningTrace.objects.unscoped("test checks the database directly").get())
    assert (end["steps"], end["termination"]) == (expected_steps, termination)
    assert len(llm.calls("reason_step")) == expected_steps
    assert len(llm.calls("feedback")) == expected_steps - 1  # none after the last step


def test_the_models_own_final_does_not_end_the_loop_before_min(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    llm.script("reason_step", *[step(n, 0.9, status="final") for n in range(1, 5)])
    llm.script("feedback", *[fb(n) for n in range(1, 4)])
    llm.script("synthesize", assess(response="Answer."))
    deep_chat.say("question")
    assert (
        end_of(ReasoningTrace.objects.unscoped("test checks the database directly").get())["steps"]
        == 4
    )


def four_steps_without_refinement(deep_chat: Any, llm: Any) -> None:
    """A deliberative turn of four reasoning steps (three feedbacks between them), then the
    synthesis sent as it is."""
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    script_loop(llm, [0.3, 0.4, 0.5, 0.8])
    llm.script("synthesize", assess(response="Answer."))
    deep_chat.say("question")


def test_feedback_sees_the_whole_history_and_the_definitions_every_time(deep_chat, llm):
    four_steps_without_refinement(deep_chat, llm)

    calls = llm.calls("feedback")
    assert len(calls) == 3
    for n, call in enumerate(calls, start=1):
        prompt = call.prompt_text
        for principle in SUPPORT["principles"]:
            assert principle["definition"] in prompt  # re-injected every time
        for earlier in range(1, n + 1):
            assert f"reasoning {earlier}" in prompt  # the whole history
        assert f"reasoning {n + 1}" not in prompt
        assert f"Current step {n}" in prompt


def test_feedback_reaches_the_next_steps_messages(deep_chat, llm):
    four_steps_without_refinement(deep_chat, llm)

    calls = llm.calls("reason_step")
    for n, call in enumerate(calls[1:], start=2):
        texts = [message_text(m) for m in call.messages]
        for earlier in range(1, n):
            line = f"[Server Feedback from Step {earlier}]: {fb(earlier)['feedback']}"
            assert line in texts
    assert not any("[Server Feedback" in message_text(m) for m in calls[0].messages)
    # and the synthesis writes from every step
    synthesis = llm.calls("synthesize")[0].prompt_text
    assert all(f"reasoning {n}" in synthesis for n in range(1, 5))


def test_refinement_builds_on_the_latest_state_in_event_order(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=3, min_steps=1)
    script_loop(llm, [0.9])
    llm.script("synthesize", assess(response="Version zero."))
    llm.script("refine_critique", rc(50, "Version zero."), rc(60), rc(70))
    llm.script(
        "improve",
        {"response": "Version one."},
        {"response": "Version two."},
        {"response": "Version three."},
    )

    [reply] = deep_chat.say("question")

    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    states = [s.output for s in trace.steps.filter(name="refinement").order_by("index")]
    assert [(s["state"], s["iteration"]) for s in states] == THREE_REFINEMENT_STATES
    critiques = [c.prompt_text for c in llm.calls("refine_critique")]
    improves = [c.prompt_text for c in llm.calls("improve")]
    for n, version in enumerate(["Version zero.", "Version one.", "Version two."]):
        assert version in critiques[n] and version in improves[n]
    assert "Version one." not in critiques[0] and "Version zero." not in critiques[2]
    assert reply.text == "Version three."  # scores rose: the last improvement is kept
    assert states[1]["issues"] == [
        {"quote": "Version zero.", "problem": "says too little", "kind": "missing_info"}
    ]
    assert len(llm.requests) == 1 + 1 + (1 + 2 * 3) - 1  # step, synthesis (= the draft), 2N


def test_the_best_scoring_version_is_kept_not_blindly_the_last(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=2, min_steps=1)
    script_loop(llm, [0.9])
    llm.script("synthesize", assess(response="The good draft."))
    llm.script("refine_critique", rc(80), rc(40))  # the improvement made it worse
    llm.script("improve", {"response": "A worse rewrite."}, {"response": "Worse still."})

    [reply] = deep_chat.say("question")

    assert reply.text == "The good draft."
    assert (
        end_of(ReasoningTrace.objects.unscoped("test checks the database directly").get())[
            "best_iteration"
        ]
        == 0
    )


def test_refinement_stops_early_at_the_plans_score(deep_chat, llm):
    set_deliberation(
        deep_chat.client.plan_id, refinement_iterations=3, refinement_stop_score=85, min_steps=1
    )
    script_loop(llm, [0.9])
    llm.script("synthesize", assess(response="Draft."))
    llm.script("refine_critique", rc(60, "Draft."), rc(90))
    llm.script("improve", {"response": "Improved once."})

    [reply] = deep_chat.say("question")

    assert reply.text == "Improved once."
    assert [r.step for r in llm.requests][-4:] == [
        "synthesize",
        "refine_critique",
        "improve",
        "refine_critique",
    ]
    end = end_of(ReasoningTrace.objects.unscoped("test checks the database directly").get())
    assert end["stopped_early"] and end["refinement_score"] == 90


def test_close_hypotheses_ask_one_clarifying_question_instead_of_the_loop(deep_chat, llm):
    hypotheses = [
        {"intent": "a refund", "confidence": 0.5},
        {"intent": "an exchange", "confidence": 0.4},
        {"intent": "store credit", "confidence": 0.1},
    ]
    llm.script("reason_step", step(1, 0.4, hypotheses=hypotheses))
    llm.script(
        "clarify",
        {"question": "Would you like a refund or an exchange?", "options": ["Refund", "Exchange"]},
    )

    [reply] = deep_chat.say("I want to send this back")

    assert reply.kind == Kind.CLARIFICATION
    assert reply.text == "Would you like a refund or an exchange?"
    assert reply.data["options"] == ["Refund", "Exchange"]
    assert [r.step for r in llm.requests] == ["reason_step", "clarify"]
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.steps.get(name="clarify").output["hypotheses"][0] == {
        "intent": "a refund",
        "confidence": 0.5,
    }
    # the widget gets the options (quick replies)
    assert "clarifying" in llm.calls("clarify")[0].prompt_text.lower()

    # the answer is reasoned on, not asked about again
    llm.reset()
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0, min_steps=1)
    llm.script("reason_step", step(1, 0.9, hypotheses=hypotheses))
    llm.script("synthesize", assess(response="Here is how a refund works."))
    [answer] = deep_chat.say("Refund")
    assert answer.text == "Here is how a refund works."


def test_distinct_hypotheses_do_not_ask(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0, min_steps=1)
    hypotheses = [{"intent": "a refund", "confidence": 0.7}, {"intent": "x", "confidence": 0.54}]
    llm.script("reason_step", step(1, 0.9, hypotheses=hypotheses))
    llm.script("synthesize", assess(response="Answer."))
    [reply] = deep_chat.say("question")
    assert reply.kind == Kind.TEXT and not llm.calls("clarify")


def test_a_lying_model_cannot_run_a_destructive_tool_unconfirmed(deep_chat, llm, webhook):
    set_deliberation(deep_chat.client.plan_id, min_steps=1)
    script_loop(llm, [0.95])
    llm.script(
        "synthesize",
        cancel_assess(
            response="Cancelling it now.",
            confidence=10,
            is_destructive=False,
            needs_confirmation=False,
        ),
    )
    llm.script("critique", critique("PROCEED"))  # the critique is lied to as well

    [reply] = deep_chat.say("Cancel order TH-12345")

    assert webhook.requests == []
    assert reply.kind == Kind.CONFIRMATION_REQUEST
    assert PendingAction.objects.unscoped("test checks the database directly").get().params == {
        "order_id": "TH-12345"
    }
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.critique_triggered and "destructive_tool" in trace.critique_reasons
    assert not llm.calls("refine_critique")  # GuideDesk's own confirmation text is not rewritten

    # the customer's yes runs it — through the same guards, without a new loop
    llm.script(
        "synthesize",
        assess(response="Done.", tool_call="cancel_order", tool_params={"order_id": "TH-12345"}),
    )
    llm.script("critique", critique("PROCEED"))
    llm.script("compose", {"response": "Order TH-12345 is cancelled."})
    from tests.support.fake_webhook import Reply

    webhook.script(Reply.ok({"cancelled": True}))
    [done] = deep_chat.say("Yes")
    assert done.text == "Order TH-12345 is cancelled."
    assert len(webhook.requests) == 1
    assert len(llm.calls("reason_step")) == 1  # only the first turn's
    # The rule for reading a confirmation state is in the system message only with a state.
    [looped] = llm.calls("reason_step")
    after_yes = llm.calls("synthesize")[-1]
    assert CONFIRMATION_RULE not in looped.messages[0]["content"]
    assert CONFIRMATION_RULE in after_yes.messages[0]["content"]
    assert any('label="confirmation state"' in m["content"] for m in after_yes.messages)


def test_a_token_cap_ends_the_loop_with_budget_and_still_answers(deep_chat, llm, settings):
    settings.LLM_MAX_COMPLETION_TOKENS = 200
    Plan.objects.filter(pk=deep_chat.client.plan_id).update(per_turn_token_cap=4000)
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=1)
    llm.default("reason_step", step(0, 0.2))
    llm.default("feedback", fb(0))
    llm.script("synthesize", assess(response="Best answer so far."))
    llm.default("refine_critique", rc(95))

    [reply] = deep_chat.say("question")

    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    end = end_of(trace)
    assert end["termination"] == "budget"
    assert 1 <= end["steps"] < 10
    assert reply.text == "Best answer so far."
    assert trace.prompt_tokens + trace.completion_tokens <= 4000
    assert trace.steps.filter(name="budget").exists()


def test_a_failing_step_ends_the_loop_with_error_and_the_steps_so_far(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    llm.script("reason_step", step(1, 0.3), step(2, 0.4), Fail(status=500), Fail(status=500))
    llm.script("feedback", fb(1), fb(2))
    llm.script("synthesize", assess(response="Answer from two steps."))

    [reply] = deep_chat.say("question")

    assert reply.text == "Answer from two steps."
    end = end_of(ReasoningTrace.objects.unscoped("test checks the database directly").get())
    assert (end["termination"], end["steps"]) == ("error", 2)


def test_a_first_step_that_fails_hands_over_like_any_failed_turn(deep_chat, llm):
    llm.script("reason_step", Fail(status=500), Fail(status=500))
    [reply] = deep_chat.say("question")
    assert reply.kind == Kind.HANDOFF
    assert ReasoningTrace.objects.unscoped("test checks the database directly").get().escalated


@pytest.mark.django_db(transaction=True)
def test_a_staff_takeover_stops_the_loop_at_the_next_step(deep_chat, llm):
    calls = {"n": 0}

    def take_over_at_step_3(request):
        calls["n"] += 1
        if calls["n"] == 2:  # the second feedback call: staff take over meanwhile
            from django.db import connection as thread_connection

            try:
                from apps.conversations.models import Conversation

                Conversation.objects.unscoped("test checks the database directly").filter(
                    pk=deep_chat.conversation.pk
                ).update(status=ConversationStatus.ESCALATED)
            finally:
                thread_connection.close()
        return fb(calls["n"])

    llm.script("reason_step", *[step(n, 0.3) for n in range(1, 11)])
    llm.default("feedback", take_over_at_step_3)

    replies = deep_chat.say("question")

    assert replies == []
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    assert trace.status == "skipped"
    assert end_of(trace)["termination"] == "staff_takeover"
    assert len(llm.calls("reason_step")) == 2
    assert not llm.calls("synthesize")


def test_usage_is_recorded_per_step_at_the_deliberative_multiplier(deep_chat, llm):
    script_loop(llm, [0.5, 0.6, 0.7, 0.8])
    llm.script("synthesize", assess(response="Answer."))
    llm.script("refine_critique", rc(60, "Answer."), rc(70))
    llm.script("improve", {"response": "Better."}, {"response": "Best."})

    deep_chat.say("question")

    records = UsageRecord.objects.unscoped("test checks the database directly").order_by("pk")
    assert [r.step for r in records] == [r.step for r in llm.requests]
    assert {r.mode for r in records} == {"deliberative"}
    assert {r.multiplier for r in records} == {Decimal("2.5")}
    assert all(r.prompt_tokens > 0 and r.cost_usd > 0 for r in records)
    steps = {r.step for r in records}
    assert steps == {"reason_step", "feedback", "synthesize", "refine_critique", "improve"}


def test_one_telemetry_event_per_step(deep_chat, llm, caplog):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    script_loop(llm, [0.5, 0.6, 0.7, 0.8])
    llm.script("synthesize", assess(response="Answer."))

    with caplog.at_level(logging.INFO, logger="guidedesk.reasoning"):
        deep_chat.say("question")

    events = [json.loads(r.getMessage()) for r in caplog.records if r.name == "guidedesk.reasoning"]
    assert [e["stepIndex"] for e in events] == [1, 2, 3, 4]
    assert len({e["runId"] for e in events}) == 1
    last = events[-1]
    assert last["event"] == "reasoning_step"
    assert last["modelSelfScore"] == "0.800" and last["targetReached"] is True
    assert last["terminationReason"] == "target_reached"
    assert events[0]["terminationReason"] is None
    assert last["maxSteps"] == 10 and last["targetThreshold"] == 0.75
    assert set(last["modelScoreBreakdown"]) == set(KEYS)
    assert events[0]["feedbackLength"] == len(fb(1)["feedback"]) and last["feedbackLength"] == 0
    assert last["clientId"] == deep_chat.client.pk
    assert last["conversationId"] == deep_chat.conversation.pk
    assert all(isinstance(e["latencyMs"], int) for e in events)


@pytest.mark.django_db(transaction=True)
def test_progress_is_reported_before_each_step(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    seen: list[Any] = []

    def record_progress(request):
        from django.db import connection as thread_connection

        try:
            seen.append(
                ReasoningTrace.objects.unscoped("test checks the database directly")
                .values_list("progress", flat=True)
                .first()
            )
        finally:
            thread_connection.close()
        return step(len(seen), 0.8)

    llm.default("reason_step", record_progress)
    llm.default("feedback", fb(0))
    llm.script("synthesize", assess(response="Answer."))
    deep_chat.say("question")
    # what an observer (the widget's event stream) reads while each step's call is made
    assert seen == [{"step": n, "max_steps": 10} for n in range(1, 5)]


def test_the_offline_demo_model_runs_the_whole_deliberative_turn(deep_chat, settings):
    settings.OPENAI_API_KEY = ""
    [reply] = deep_chat.say("What is your returns policy?")
    trace = ReasoningTrace.objects.unscoped("test checks the database directly").get()
    end = end_of(trace)
    assert end["termination"] == "target_reached" and end["steps"] >= 4
    assert reply.data["offline"] is True
    assert "reply here" in reply.text.lower()  # the offline improvement's closing line
    assert names(trace).count("refinement") >= 3

    # "this or that": the offline model's hypotheses are close, so it asks
    [question] = deep_chat.say("Should I get a refund or an exchange?")
    assert question.kind == Kind.CLARIFICATION and len(question.data["options"]) == 2


def test_the_customer_message_is_stored_before_any_call(deep_chat, llm):
    llm.script("reason_step", Fail(status=500), Fail(status=500))
    deep_chat.say("my words")
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="user", text="my words")
        .exists()
    )
    assert (
        ReasoningStep.objects.unscoped("test checks the database directly")
        .filter(name="reason_step")
        .exists()
    )


def test_manage_py_reason_runs_the_deliberative_loop_outside_any_conversation(
    deliberative_shop, llm
):
    """The playground's CLI drives this mode through the same Turn interface: each step with
    its scores and the server's feedback, the refinement states and how the loop ended."""
    import io

    from django.core.management import call_command

    from apps.billing.models import UsagePurpose

    script_loop(llm, [0.5, 0.6, 0.7, 0.8])
    llm.script("synthesize", assess(response="Returns within 30 days."))
    llm.script("refine_critique", rc(70, "Returns within 30 days."))
    llm.script("improve", {"response": "Returns within 30 days. Reply here to start one."})
    out = io.StringIO()
    call_command(
        "reason",
        "--client",
        "deep-shop",
        "--mode",
        "deliberative",
        "--iterations",
        "1",
        "--rubric",
        "support",
        "Can I return my jacket?",
        stdout=out,
        stderr=io.StringIO(),
    )
    text = out.getvalue()
    assert text.count("] reason_step") == 4
    assert "[Server Feedback from Step 3]: " + fb(3)["feedback"] in text
    assert "Refinement · critique (iteration 1)\n    Score 70/100" in text
    assert "Termination target_reached · Steps 4" in text
    assert "Returns within 30 days. Reply here to start one." in text
    assert not Message.objects.unscoped("test checks the database directly").exists()
    assert (
        not ReasoningTrace.objects.unscoped("test checks the database directly")
        .filter(kind=TraceKind.TURN)
        .exists()
    )  # no customer turn
    assert {
        r.purpose for r in UsageRecord.objects.unscoped("test checks the database directly").all()
    } == {UsagePurpose.PLAYGROUND}
    assert {
        r.mode for r in UsageRecord.objects.unscoped("test checks the database directly").all()
    } == {"deliberative"}
