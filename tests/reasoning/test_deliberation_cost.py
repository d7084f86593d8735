"""Cheaper depth: deliberative prompts laid out for the provider's prompt cache (a shared
prefix, append-only steps, the step's own part last), the feedback LLM only when it can change
the next step, the `stalled` stop — through the real `openai` SDK against the scripted server,
which emulates OpenAI's prompt caching."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from apps.billing.models import UsageRecord
from apps.conversations.services import conversation_create
from apps.reasoning.context import keys_text
from apps.reasoning.deliberation.termination import (
    Termination,
    projected,
    repeats,
    termination_after,
)
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.steps import get as get_step
from apps.reasoning.steps._shared import language_asked, with_language
from devtools.fake_llm import message_text
from tests.factories import set_deliberation
from tests.reasoning.test_deliberative import end_of, rc, step
from tests.support.shop import Chat, assess, make_shop

pytestmark = pytest.mark.django_db

CHAINED = ("reason_step", "synthesize")


@pytest.fixture
def deep_chat(db, webhook, django_capture_on_commit_callbacks) -> Chat:
    client = make_shop("deliberative", webhook.url(), slug="deep-shop")
    set_deliberation(client.plan_id, refinement_iterations=2)
    client.plan.refresh_from_db()
    conversation = conversation_create(client=client)[0]
    return Chat(client, conversation, django_capture_on_commit_callbacks)


def trace() -> ReasoningTrace:
    return ReasoningTrace.objects.unscoped("test checks the database directly").get()


def test_every_call_begins_with_the_shared_prefix_and_the_loop_only_appends(deep_chat, llm):
    llm.script("reason_step", *[step(n, s) for n, s in enumerate([0.5, 0.5, 0.6, 0.8], 1)])
    llm.script("feedback", {"feedback": "Name the returns window."})
    llm.script("synthesize", assess(response="Returns are accepted within 30 days.", confidence=9))
    llm.script("refine_critique", rc(70, "Returns are accepted within 30 days."), rc(95))
    llm.script("improve", {"response": "Returns are accepted within 30 days of delivery."})

    deep_chat.say("Can I still return my jacket?")

    calls = [r for r in llm.requests if r.step != "feedback"]
    assert [r.step for r in calls] == [
        *["reason_step"] * 4,
        "synthesize",
        "refine_critique",
        "improve",
        "refine_critique",
    ]
    first = calls[0].messages
    for request in calls:
        messages = request.messages
        # The same system message (rules + business context) first in every call …
        assert messages[0] == first[0] and messages[0]["role"] == "system"
        # … the conversation before the step's own part …
        assert messages[1 : len(first) - 2] == first[1 : len(first) - 2]
        # … and the step's instructions last, a system message ending with the language line.
        assert messages[-1]["role"] == "system" and language_asked(messages) == "en"
        assert "Can I still return my jacket?" not in message_text(messages[-1])
    # Each loop call re-sends the previous call's prompt (less its request) and appends to it;
    # the synthesis appends to the whole loop.
    chained = [r.messages for r in calls if r.step in CHAINED]
    for before, after in itertools.pairwise(chained):
        assert after[: len(before) - 1] == before[:-1]
        assert len(after) > len(before)
    # The loop's rules and rubric are sent once, not per step.
    protocol = [m for m in chained[-1] if "Rubric" in message_text(m)]
    assert len(protocol) == 1 and protocol[0]["role"] == "system"


def test_the_scripted_provider_serves_the_repeated_prefix_from_its_cache(deep_chat, llm):
    # A business context long enough for the provider's cache (1,024 tokens or more).
    client = deep_chat.client
    client.business_info = {
        **client.business_info,
        "policies": {"returns": "Returns are accepted within 30 days of delivery. " * 120},
    }
    client.save(update_fields=["business_info"])
    llm.script("reason_step", *[step(n, s) for n, s in enumerate([0.6, 0.7, 0.8, 0.9], 1)])
    llm.script("synthesize", assess(response="Returns are accepted within 30 days.", confidence=9))
    set_deliberation(client.plan_id, refinement_iterations=0)

    deep_chat.say("Can I still return my jacket?")

    records = list(
        UsageRecord.objects.unscoped("test checks the database directly")
        .filter(trace=trace())
        .order_by("pk")
        .values_list("step", "prompt_tokens", "cached_tokens")
    )
    assert [r[0] for r in records] == [*["reason_step"] * 4, "synthesize"]
    assert records[0][1] >= 1024 and records[0][2] == 0  # nothing cached yet
    for _, prompt, cached in records[1:]:
        # everything but the newest messages (and the last partial 128-token block)
        assert cached % 128 == 0 and prompt - cached < 128 + 300
    assert [r["cached_tokens"] for r in llm.usage_log] == [r[2] for r in records]


def test_a_step_on_course_gets_the_servers_note_instead_of_a_feedback_call(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    # +0.1 after step 1 (on course), +0.0 after step 2 (the coach is asked), then +0.2
    llm.script("reason_step", *[step(n, s) for n, s in enumerate([0.5, 0.6, 0.6, 0.8], 1)])
    llm.script("feedback", {"feedback": "Acknowledge the delay before the facts."})
    llm.script("synthesize", assess(response="Answer."))

    deep_chat.say("My order is late and I am annoyed")

    assert [r.step for r in llm.requests] == [
        "reason_step",
        "reason_step",
        "reason_step",
        "feedback",
        "reason_step",
        "synthesize",
    ]
    # The feedback call sees the whole history, definitions included.
    [coach] = llm.calls("feedback")
    assert "step 3" in message_text(coach.messages[1]) and "step 1" in message_text(
        coach.messages[1]
    )
    sent = [message_text(m) for m in llm.calls("reason_step")[3].messages]
    assert any(t.startswith("[Server Feedback from Step 1]: Mean 0.50, 0.25 below") for t in sent)
    assert any(
        t.startswith("[Server Feedback from Step 2]: On course: mean 0.60, up 0.10") for t in sent
    )
    assert "[Server Feedback from Step 3]: Acknowledge the delay before the facts." in sent
    notes = list(
        trace()
        .steps.filter(name__in=["feedback", "feedback_note"])
        .order_by("index")
        .values_list("output", flat=True)
    )
    # Every step but the last has its feedback on the trace, saying who wrote it.
    assert [(n["step"], n.get("by", "llm")) for n in notes] == [
        (1, "server"),
        (2, "server"),
        (3, "llm"),
    ]
    assert (
        UsageRecord.objects.unscoped("test checks the database directly")
        .filter(step="feedback")
        .count()
        == 1
    )


def test_a_loop_that_cannot_reach_the_target_stops_stalled(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    llm.script("reason_step", *[step(n, s) for n, s in enumerate([0.4, 0.4, 0.42, 0.43], 1)])
    llm.script("feedback", *[{"feedback": f"feedback {n}"} for n in range(2, 4)])
    llm.script("synthesize", assess(response="Answer."))

    [reply] = deep_chat.say("A question that needs thought")

    assert reply.text == "Answer."
    end = end_of(trace())
    assert (end["steps"], end["termination"]) == (4, "stalled")
    assert len(llm.calls("reason_step")) == 4


def test_the_stall_rule_and_the_feedback_rule_can_be_turned_off(deep_chat, llm, settings):
    settings.REASONING_DELIBERATION_STOP_STALLED = False
    settings.REASONING_FEEDBACK_ON_COURSE_GAIN = -1
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0, max_steps=5)
    llm.script("reason_step", *[step(n, 0.4) for n in range(1, 6)])
    llm.script("feedback", *[{"feedback": f"feedback {n}"} for n in range(1, 5)])
    llm.script("synthesize", assess(response="Answer."))

    deep_chat.say("A question that needs thought")

    assert (end_of(trace())["steps"], end_of(trace())["termination"]) == (5, "max_steps")
    assert len(llm.calls("feedback")) == 4


@pytest.mark.parametrize(
    ("means", "expected"),
    [
        ([0.5], 0.5),
        ([0.5, 0.6], 0.6 + 0.1 * 8),
        ([0.6, 0.5, 0.55, 0.5], 0.5),  # a falling pace counts as none
        ([0.4, 0.45, 0.5, 0.55], 0.55 + 0.05 * 6),
    ],
)
def test_projected_mean_at_max(means: list[float], expected: float) -> None:
    assert projected(means, 10) == pytest.approx(expected)


def test_stalled_only_after_min_and_never_before_the_target_checks() -> None:
    args: dict[str, Any] = {"min_steps": 4, "max_steps": 10, "target": 0.75}
    flat = [0.4, 0.4, 0.4]
    assert termination_after(step=3, mean=0.4, means=flat, **args) is None  # before MIN
    assert termination_after(step=4, mean=0.4, means=[*flat, 0.4], **args) == Termination.STALLED
    rising = [0.4, 0.45, 0.5, 0.55]  # 0.55 + 6 × 0.05 = 0.85 ≥ 0.75: keep going
    assert termination_after(step=4, mean=0.55, means=rising, **args) is None
    assert termination_after(step=4, mean=0.8, means=[*flat, 0.8], **args) == (
        Termination.TARGET_REACHED
    )
    assert termination_after(step=4, mean=0.4, means=None, **args) is None  # rule off


def test_the_language_line_goes_to_a_trailing_system_message() -> None:
    messages = [
        {"role": "system", "content": "Our rules."},
        {"role": "user", "content": "hola"},
        {"role": "system", "content": "Now answer."},
    ]
    out = with_language(messages, step=get_step("synthesize"), code="es")
    assert out[0] == messages[0] and out[1] == messages[1]  # the shared prefix is untouched
    assert out[2]["content"] == "Now answer.\n\nReply in Spanish (es)."
    assert language_asked(out) == "es"
    # A prompt that ends with a user message keeps the line in its first system message.
    single = with_language(messages[:2], step=get_step("respond"), code="es")
    assert single[0]["content"].endswith("Reply in Spanish (es).") and language_asked(single)


def test_the_adaptive_keys_line_does_not_grow_with_the_tools() -> None:
    keys = [
        "policies.returns",
        "policies.shipping",
        "faqs",
        "kb:<search words>",
        *(f"tool_schema:tool_{n}" for n in range(20)),
    ]
    # the tools' schemas are named by the minimal context's Tools line, not one key each
    assert keys_text(keys) == "policies.<returns|shipping>, faqs, kb:<search words>"


RISING = [0.5, 0.55, 0.6, 0.65, 0.7, 0.8]  # on course: would reach the target at step 6
THOUGHTS = [
    "The customer asks how long the returns window is for boots.",
    "The returns policy gives 60 days from delivery, unused, tags attached.",
    "Worn soles cannot be accepted; say so kindly and offer an exchange for size.",
    "A prepaid label is included; $7.95 is deducted unless the item is defective.",
    "Next step for the customer: start the return on the Returns page with the order number.",
    "Tone: warm, brief, no promises beyond the written policy.",
]


def loop_steps(contents: list[str]) -> list[dict[str, Any]]:
    return [
        {**step(n, score), "content": content}
        for n, (score, content) in enumerate(zip(RISING, contents, strict=False), 1)
    ]


def test_a_loop_that_repeats_itself_stops_after_min(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    # Steps 3 and 4 say the same (the step number aside): converged, nothing left to add.
    same = "Weighing the returns policy against what the customer asked."
    llm.script("reason_step", *loop_steps([*THOUGHTS[:2], f"Step 3: {same}", f"Step 4: {same}"]))
    llm.script("synthesize", assess(response="Answer."))

    deep_chat.say("A question that needs thought")

    end = end_of(trace())
    assert (end["steps"], end["termination"]) == (4, "stalled")
    assert end["detail"].startswith("repeated")
    assert len(llm.calls("reason_step")) == 4


def test_a_loop_whose_steps_move_on_runs_to_its_target(deep_chat, llm):
    set_deliberation(deep_chat.client.plan_id, refinement_iterations=0)
    llm.script("reason_step", *loop_steps(THOUGHTS))
    llm.script("synthesize", assess(response="Answer."))

    deep_chat.say("A question that needs thought")

    end = end_of(trace())
    assert (end["steps"], end["termination"]) == (6, "target_reached")


def test_a_repeat_stops_only_after_min_and_in_any_language() -> None:
    args = {"min_steps": 4, "max_steps": 10, "target": 0.75}
    rising = [0.5, 0.55, 0.6]
    assert termination_after(step=3, mean=0.6, means=rising, repeated=True, **args) is None
    on_course = [*rising, 0.65]
    assert termination_after(step=4, mean=0.65, means=on_course, **args) is None
    assert (
        termination_after(step=4, mean=0.65, means=on_course, repeated=True, **args)
        == Termination.STALLED
    )
    spanish = "Paso 4: la política de devoluciones da 60 días desde la entrega."
    assert repeats(spanish.replace("4", "5"), spanish)
    assert not repeats("Paso 5: falta decir cómo empezar la devolución en la web.", spanish)
    hebrew = "שלב 4: מדיניות ההחזרות נותנת 60 יום מיום המסירה."
    assert repeats(hebrew.replace("4", "5"), hebrew)
