"""The server-controlled reasoning loop (seed: dharma-feedback-loop).

    while not terminated:
      1. reason_step — the model reasons one step and self-scores each rubric principle
      2. the server keeps the score history (step, scores, mean, content)
      3. termination (termination.py): MIN ≤ steps ≤ MAX, stop at TARGET after MIN
      4. feedback — the feedback LLM sees the current scores, the WHOLE history and the
         principle definitions (every time) and writes guidance …
      5. … injected into the next step's context as "[Server Feedback from Step N]: …"

The messages are append-only (docs/llm-protocol.md, "Message layout"): every call begins with
the same shared prefix (our rules, the business's context, the conversation), then the loop's
transcript (the protocol and rubric once, then each step and the feedback after it), then the
step's short request — so each call re-uses the previous call's prompt as the provider's cached
prefix, and the synthesis re-uses the whole loop.

There is no feedback after the last step (nothing would read it), and the feedback LLM is
called only when its guidance can change the next step: when the mean did not rise by
`REASONING_FEEDBACK_ON_COURSE_GAIN` (0.03) since the step before. Step 1 (no trend yet) and a
step on course get the server's own note instead (its mean, the gain, the distance to the
target and the weakest principle with its definition — numbers and our rubric's words only).

Each event is journalled as a trace step right after it happens — the `reason_step` and
`feedback` calls' own rows, with the step number and the mean added — so observers see the loop
live; one structured telemetry event is logged per step.

Before each call — the first step's too — the loop checks there is room for it AND for the
synthesis after it (per-turn token cap; the turn's deadline): the synthesis is sized by the
prompt it will really have (the shared prefix, the transcript so far and what the call may add
to it: `Room`) plus its completion cap. When there is no room, the loop ends with `budget` and
the synthesis writes the answer from the steps so far; with no room even for the first step it
ends with no step, and the mode answers without the loop (its adaptive path). A call refused by
the token cap ends it the same way; a call that fails twice ends it with `error` (with at least
one step done; with none, the failure goes to the turn pipeline: fallback reply and hand-off)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from apps.billing.services.budgets import UsageLimitReached
from apps.core import deadlines
from apps.core.deadlines import DeadlineExceeded
from apps.reasoning.deliberation.config import DeliberationConfig
from apps.reasoning.deliberation.telemetry import reasoning_step_event
from apps.reasoning.deliberation.termination import (
    Termination,
    repeats,
    termination_after,
)
from apps.reasoning.llm.errors import LLMError
from apps.reasoning.llm.window import TOKENS_PER_MESSAGE, estimate_tokens
from apps.reasoning.meter import TokenCapExceeded
from apps.reasoning.steps import Step, data_blocks, reason_step, synthesize, with_language
from apps.reasoning.steps import feedback as feedback_step
from apps.reasoning.steps.reason_step import ReasonStepOut
from apps.reasoning.turn import Turn

BUDGET_ERRORS = (TokenCapExceeded, UsageLimitReached, DeadlineExceeded)
# A deliberative turn keeps this share of its deadline for the synthesis and refinement.
DEADLINE_RESERVE_SHARE = 0.25


@dataclass
class StepEntry:
    """One entry of the score history."""

    step: int
    scores: dict[str, float]
    mean: float
    content: str
    status: str
    rationale: str
    hypotheses: list[dict[str, Any]] = field(default_factory=list)
    feedback: str = ""
    feedback_by: str = "llm"  # or "server": the step was on course (no feedback call)

    def history(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "scores": self.scores,
            "mean": self.mean,
            "content": self.content,
        }


@dataclass
class LoopResult:
    steps: list[StepEntry]
    termination: Termination | None  # None: stopped after step 1 to ask a clarifying question
    detail: str = ""
    # What the loop sent after the shared prefix (the protocol, each step and its feedback):
    # the synthesis appends to it.
    transcript: list[dict[str, str]] = field(default_factory=list)

    @property
    def final_mean(self) -> float | None:
        return self.steps[-1].mean if self.steps else None

    @property
    def hypotheses(self) -> list[dict[str, Any]]:
        return self.steps[0].hypotheses if self.steps else []


def mean(scores: dict[str, float]) -> float:
    return round(sum(scores.values()) / len(scores), 3) if scores else 0.0


def _prompt_tokens(messages: list[dict[str, str]]) -> int:
    """A prompt's tokens as the meter estimates them before a call."""
    return sum(estimate_tokens(m.get("content", "")) + TOKENS_PER_MESSAGE for m in messages)


def _worst_case(messages: list[dict[str, str]]) -> int:
    """What one call may take at most: its prompt plus `LLM_MAX_COMPLETION_TOKENS` (the
    meter's check)."""
    return _prompt_tokens(messages) + int(settings.LLM_MAX_COMPLETION_TOKENS)


def as_sent(turn: Turn, step: Step[Any], messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """`messages` as the meter will see them: with the step's language line (`Turn.llm`)."""
    return with_language(messages, step=step, code=turn.language)


@dataclass(frozen=True)
class Room:
    """What the loop keeps for the answer after each call: the synthesis (the call that writes
    the answer from the steps so far), sized by the prompt it would really have — the shared
    prefix, the transcript so far and what the next call may add to it — plus its completion
    cap. What a call may add is bounded by the completion cap: a step's entry (its content and
    rationale come from one reply) with the server's note after it, or the feedback."""

    turn: Turn
    prefix: list[dict[str, str]]
    entry_overhead: int  # a step's entry beyond the model's words: labels, scores, the mean
    note_tokens: int  # the server's note on a step (its longest form), with its label

    @classmethod
    def of(cls, turn: Turn, config: DeliberationConfig, prefix: list[dict[str, str]]) -> Room:
        scores = dict.fromkeys(config.keys, 1 / 3)  # the longest a score prints
        blank = StepEntry(
            step=config.max_steps, scores=scores, mean=0.0, content="", status="", rationale=""
        )
        overhead = _prompt_tokens(entry_messages(blank)) + 2  # + the content's rounding
        previous = StepEntry(
            step=config.max_steps, scores=scores, mean=1.0, content="", status="", rationale=""
        )
        notes = [
            server_note(
                StepEntry(
                    step=config.max_steps,
                    scores={**dict.fromkeys(config.keys, 1.0), key: 0.0},
                    mean=0.0,
                    content="",
                    status="",
                    rationale="",
                ),
                previous,
                config,
            )
            for key in config.keys or [""]
        ]
        note = max(
            _prompt_tokens([{"content": f"[Server Feedback from Step {config.max_steps}]: {text}"}])
            for text in notes
        )
        return cls(turn=turn, prefix=prefix, entry_overhead=overhead, note_tokens=note + 2)

    def answer(self, transcript: list[dict[str, str]], *, adds: int = 0) -> int:
        """The synthesis's worst case after `transcript` and `adds` tokens more of it."""
        messages = synthesize.prompt(prefix=self.prefix, transcript=transcript)
        return _worst_case(as_sent(self.turn, synthesize.STEP, messages)) + adds

    def after_step(self, transcript: list[dict[str, str]]) -> int:
        """The answer after the next step: its entry (at most a whole reply) and a note."""
        reply = int(settings.LLM_MAX_COMPLETION_TOKENS)
        return self.answer(transcript, adds=self.entry_overhead + reply + self.note_tokens)

    def after_feedback(self, transcript: list[dict[str, str]], step: int) -> int:
        """The answer after a feedback call on `step` (its entry is in `transcript`)."""
        label = _prompt_tokens([{"content": f"[Server Feedback from Step {step}]: "}]) + 1
        return self.answer(transcript, adds=label + int(settings.LLM_MAX_COMPLETION_TOKENS))


def no_room(turn: Turn, messages: list[dict[str, str]], *, answer: int) -> dict[str, Any]:
    """Why this call (`messages`, as sent) plus the answer after it (`answer` tokens at most)
    would not fit — with the figures, for the trace's `budget` step; empty when they fit."""
    meter = getattr(turn.rec, "meter", None)
    cap = getattr(meter, "token_cap", None)
    if meter is not None and cap:
        call = _worst_case(messages)
        needed = meter.tokens_used + call + answer
        if needed > cap:
            return {
                "reason": f"token cap {cap}: the next call and the answer after it could "
                f"reach {needed}",
                "token_cap": cap,
                "tokens_used": meter.tokens_used,
                "call_tokens": call,
                "answer_tokens": answer,
            }
    left = deadlines.remaining()
    if left is not None:
        reserve = DEADLINE_RESERVE_SHARE * float(settings.REASONING_TURN_DEADLINE_SECONDS)
        if left < reserve:
            return {"reason": f"{left:.0f} s of the turn's deadline left; kept for the answer"}
    return {}


def entry_messages(entry: StepEntry) -> list[dict[str, str]]:
    """One step as the later calls see it: the step with its self-scores, then the feedback
    after it. The model's own words (which may echo the customer's) with data tags defused."""
    messages = [
        {
            "role": "assistant",
            "content": f"[Step {entry.step}] {data_blocks.neutralise(entry.content)}\nSelf-scores: "
            f"{json.dumps(entry.scores, sort_keys=True)} (mean {entry.mean:.3f}). "
            f"Rationale: {data_blocks.neutralise(entry.rationale)}",
        }
    ]
    if entry.feedback:
        messages.append(
            {
                "role": "assistant",
                "content": f"[Server Feedback from Step {entry.step}]: "
                f"{data_blocks.neutralise(entry.feedback)}",
            }
        )
    return messages


def on_course_gain() -> float | None:
    """The rise of the mean that counts as on course (no feedback call); None: always call."""
    gain = settings.REASONING_FEEDBACK_ON_COURSE_GAIN
    return None if gain is None or gain < 0 else float(gain)


def server_note(entry: StepEntry, previous: StepEntry | None, config: DeliberationConfig) -> str:
    """The server's own feedback on step 1 or a step on course: numbers and the weakest
    principle's key and label (its definition is in the loop's protocol message)."""
    weakest = min(entry.scores, key=entry.scores.__getitem__) if entry.scores else ""
    # The label only: the definition is in the protocol message, once, before every step.
    definition = next((f" ({p['label']})" for p in config.principles if p["key"] == weakest), "")
    gap = config.target - entry.mean
    where = f"{gap:.2f} below the target {config.target:.2f}" if gap > 0 else "at the target"
    trend = (
        f"On course: mean {entry.mean:.2f}, up {entry.mean - previous.mean:.2f} from step "
        f"{previous.step}"
        if previous is not None
        else f"Mean {entry.mean:.2f}"
    )
    return f"{trend}, {where}." + (f" Weakest: {weakest}{definition}" if weakest else "")


def run_loop(
    turn: Turn,
    config: DeliberationConfig,
    *,
    run_id: str,
    prefix: list[dict[str, str]],
    ask_first: Callable[[StepEntry], bool] = lambda entry: False,
) -> LoopResult:
    """Run the loop after `prefix` (`steps._shared.shared_prefix`). `ask_first(step 1)` True
    stops it right after the first step (the mode then asks a clarifying question)."""
    loop = _Loop(turn, config, run_id=run_id, prefix=prefix)
    index = 0
    while True:
        index += 1
        turn.progress(index, config.max_steps)
        loop.write()  # the previous step, with its feedback, joins the transcript
        done = loop.reason(index)
        if isinstance(done, LoopResult):
            return done
        if index == 1 and ask_first(done.entry):
            loop.log(done.entry, None, done.latency_ms)
            return loop.end(None, "two readings of the message are too close to guess")
        ended = loop.terminated(done)
        if ended is None:
            ended = loop.feedback(done)
        if ended is not None:
            return ended


@dataclass(frozen=True)
class _StepDone:
    """A step the model reasoned: its entry (in the score history), the call's latency and when
    the step began (its telemetry event counts the feedback after it too)."""

    entry: StepEntry
    latency_ms: int
    started: float


class _Loop:
    """One run's state: the score history, the transcript the later calls see, and the room
    kept for the answer. Each method is one stage of a step; one that ends the loop returns
    the `LoopResult`."""

    def __init__(
        self, turn: Turn, config: DeliberationConfig, *, run_id: str, prefix: list[dict[str, str]]
    ) -> None:
        self.turn = turn
        self.config = config
        self.run_id = run_id
        self.prefix = prefix
        self.steps: list[StepEntry] = []
        self.transcript = [
            reason_step.protocol(
                principles=config.principles,
                min_steps=config.min_steps,
                max_steps=config.max_steps,
                target=config.target,
            )
        ]
        self.written = 0  # how many steps the transcript holds
        self.stop_stalled = bool(settings.REASONING_DELIBERATION_STOP_STALLED)
        self.room = Room.of(turn, config, prefix)
        self.gain = on_course_gain()
        self.client_id = getattr(turn.client, "pk", None)
        self.conversation_id = getattr(turn.conversation, "pk", None) if turn.conversation else None

    def log(self, entry: StepEntry, termination: str | None, latency_ms: int) -> None:
        reasoning_step_event(
            run_id=self.run_id,
            step=entry.step,
            max_steps=self.config.max_steps,
            mean=entry.mean,
            scores=entry.scores,
            target=self.config.target,
            termination=termination,
            latency_ms=latency_ms,
            feedback_length=len(entry.feedback),
            client_id=self.client_id,
            conversation_id=self.conversation_id,
        )

    def write(self) -> None:
        for entry in self.steps[self.written :]:
            self.transcript.extend(entry_messages(entry))
        self.written = len(self.steps)

    def end(self, termination: Termination | None, detail: str = "") -> LoopResult:
        self.write()  # the last step too, as the synthesis reads it (no feedback after it)
        return LoopResult(self.steps, termination, detail, self.transcript)

    def reason(self, index: int) -> _StepDone | LoopResult:
        """Step `index`: the `reason_step` call, its entry in the history and the trace."""
        turn, config = self.turn, self.config
        messages = reason_step.prompt(
            prefix=self.prefix, transcript=self.transcript, index=index, max_steps=config.max_steps
        )
        started = time.perf_counter()
        # Room for this step and for the answer after it — step 1 too: with no room even for
        # it the loop makes no step, and the mode answers without it (its adaptive path).
        why = no_room(
            turn,
            as_sent(turn, reason_step.STEP, messages),
            answer=self.room.after_step(self.transcript),
        )
        if why:
            turn.rec.step("budget", output={"before_step": index, **why})
            return self.end(Termination.BUDGET, why["reason"])

        def canonical(out: ReasonStepOut) -> dict[str, Any]:
            # The reason_step event as observers read it (scores over the rubric's keys).
            scores = out.scored(config.keys)
            return {
                "step": index,
                "max_steps": config.max_steps,
                "scores": scores,
                "mean": mean(scores),
                "hypotheses": out.hypotheses if index == 1 else [],
            }

        try:
            result = turn.llm(
                reason_step.STEP,
                messages,
                extra=canonical,
                index=index,
                max_steps=config.max_steps,
                keys=config.keys,
                target=config.target,
            )
        except BUDGET_ERRORS as exc:
            if not self.steps and not isinstance(exc, TokenCapExceeded):
                raise  # the monthly budget or the deadline: nothing else can answer either
            return self.end(Termination.BUDGET, "a limit refused the next step")
        except LLMError as exc:
            if not self.steps:
                raise
            return self.end(Termination.ERROR, f"{exc.kind}: {exc.message}")
        entry = self.record(index, result.parsed)
        return _StepDone(entry=entry, latency_ms=result.latency_ms, started=started)

    def record(self, index: int, out: ReasonStepOut) -> StepEntry:
        """The step's entry, added to the score history and journalled."""
        config = self.config
        scores = out.scored(config.keys)
        entry = StepEntry(
            step=index,
            scores=scores,
            mean=mean(scores),
            content=out.content,
            status=out.status,
            rationale=out.rationale,
            hypotheses=out.hypotheses if index == 1 else [],
        )
        self.steps.append(entry)
        self.turn.rec.internal(
            "reasoning_step",
            f"Step {index}/{config.max_steps} · mean {entry.mean:.2f} · {entry.status}: "
            f"{entry.content}",
            {
                "step": index,
                "max_steps": config.max_steps,
                "status": entry.status,
                "scores": entry.scores,
                "mean": entry.mean,
                "rationale": entry.rationale,
                "hypotheses": entry.hypotheses,
            },
        )
        return entry

    def terminated(self, done: _StepDone) -> LoopResult | None:
        """The loop's end after this step (termination.py), or None to go on."""
        entry, config, steps = done.entry, self.config, self.steps
        repeated = (
            self.stop_stalled and len(steps) > 1 and repeats(entry.content, steps[-2].content)
        )
        scored = functools.partial(
            termination_after,
            step=entry.step,
            mean=entry.mean,
            min_steps=config.min_steps,
            max_steps=config.max_steps,
            target=config.target,
            means=[s.mean for s in steps] if self.stop_stalled else None,
        )
        termination = scored(repeated=repeated)
        if termination is None:
            return None
        self.log(entry, termination, done.latency_ms)
        by_scores = scored()  # would the scores alone have ended it?
        detail = "repeated: the step says what the step before it said" if not by_scores else ""
        return self.end(termination, detail)

    def feedback(self, done: _StepDone) -> LoopResult | None:
        """The feedback on the step the next one reads: the server's own note when the step is
        on course, else the feedback call's (None: the loop goes on)."""
        entry = done.entry
        previous = self.steps[-2] if len(self.steps) > 1 else None
        if self.gain is not None and (previous is None or entry.mean - previous.mean >= self.gain):
            self.note(done, previous)
            return None
        return self.feedback_call(done)

    def note(self, done: _StepDone, previous: StepEntry | None) -> None:
        entry, index = done.entry, done.entry.step
        entry.feedback = server_note(entry, previous, self.config)
        entry.feedback_by = "server"
        # A trace step like the feedback call's own row (no usage: no call was made).
        self.turn.rec.step(
            "feedback_note",
            output={"step": index, "feedback": entry.feedback, "by": "server"},
        )
        self.turn.rec.internal(
            "feedback",
            f"[Server Feedback from Step {index}]: {entry.feedback}",
            {"step": index, "feedback": entry.feedback, "by": "server"},
        )
        self.log(entry, None, int((time.perf_counter() - done.started) * 1000))

    def feedback_call(self, done: _StepDone) -> LoopResult | None:
        turn, config, entry, index = self.turn, self.config, done.entry, done.entry.step
        history = [s.history() for s in self.steps]
        fb_messages = feedback_step.prompt(
            principles=config.principles,
            history=history,
            target=config.target,
            max_steps=config.max_steps,
            user_text=turn.user_message.text,
        )
        # Room for the feedback and for the answer after it: the synthesis's own prompt (the
        # loop so far, this step, the feedback), not the feedback's short one.
        why = no_room(
            turn,
            as_sent(turn, feedback_step.STEP, fb_messages),
            answer=self.room.after_feedback([*self.transcript, *entry_messages(entry)], index),
        )
        if why:
            turn.rec.step("budget", output={"before_feedback_of_step": index, **why})
            self.log(entry, Termination.BUDGET, done.latency_ms)
            return self.end(Termination.BUDGET, why["reason"])
        try:
            fb = turn.llm(
                feedback_step.STEP,
                fb_messages,
                extra={"step": index},
                history=history,
                target=config.target,
            )
        except BUDGET_ERRORS:
            self.log(entry, Termination.BUDGET, done.latency_ms)
            return self.end(Termination.BUDGET, "a limit refused the feedback call")
        except LLMError as exc:
            self.log(entry, Termination.ERROR, done.latency_ms)
            return self.end(Termination.ERROR, f"feedback {exc.kind}: {exc.message}")
        entry.feedback = fb.parsed.feedback.strip()
        turn.rec.internal(
            "feedback",
            f"[Server Feedback from Step {index}]: {entry.feedback}",
            {"step": index, "feedback": entry.feedback},
        )
        self.log(entry, None, int((time.perf_counter() - done.started) * 1000))
        return None
