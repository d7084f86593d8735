"""Judged criteria: a model's opinion of a simulated conversation (the `judge` step).

`judge_criteria` calls the step through the attempt's `TurnRecorder`, so the call is metered
with the run's purpose and journalled on its trace like every other. Its result is kept apart
from the code-checked expectations (`CaseRun.judged_passed` / `judged`): it is an opinion, and
a failure to judge is never a pass."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.reasoning import steps
from apps.reasoning.llm import LLMError
from apps.reasoning.meter import TokenCapExceeded

if TYPE_CHECKING:
    from apps.reasoning.traces import TurnRecorder

__all__ = ["judge_criteria"]


def _key(text: str) -> str:
    return " ".join(str(text).casefold().split()).strip(" .\"'")


def _match(criteria: list[str], results: list[Any]) -> list[dict[str, Any]]:
    """One entry per criterion, in order: the verdict whose `criterion` is the same text
    (spacing, case and a final full stop aside) or its number ("2"); none = not passed."""
    by_key: dict[str, Any] = {}
    for verdict in results:
        by_key.setdefault(_key(verdict.criterion), verdict)
    out = []
    for number, criterion in enumerate(criteria, 1):
        verdict = by_key.get(_key(criterion)) or by_key.get(str(number))
        if verdict is None:
            out.append(
                {
                    "criterion": criterion,
                    "passed": False,
                    "score": 0,
                    "reasoning": "",
                    "error": "the judge gave no verdict on this criterion",
                }
            )
            continue
        out.append(
            {
                "criterion": criterion,
                "passed": bool(verdict.passed),
                "score": int(verdict.score),
                "reasoning": verdict.reasoning,
            }
        )
    return out


def judge_criteria(
    *,
    recorder: TurnRecorder,
    criteria: list[str],
    transcript: list[dict[str, Any]],
    language: str = "",
) -> tuple[bool | None, list[dict[str, Any]]]:
    """(every criterion passed, one result per criterion). No criteria: (None, []). The judge
    failing (an LLM error, the token cap): (None, each criterion with `passed: None` and the
    `error`) — never a pass. A criterion the judge left out is not passed."""
    if not criteria:
        return None, []
    step = steps.get("judge")
    messages = step.prompt(
        business=recorder.client.name, criteria=criteria, transcript=transcript, language=language
    )
    hint = {"step": step.name, **step.hint(criteria=criteria, transcript=transcript)}
    try:
        result = recorder.llm(step=step.name, messages=messages, output=step.output, hint=hint)
    except (LLMError, TokenCapExceeded) as exc:
        detail = f"{exc.kind}: {exc.message}" if isinstance(exc, LLMError) else str(exc)
        return None, [{"criterion": c, "passed": None, "error": detail} for c in criteria]
    results = _match(criteria, list(result.parsed.results))
    return all(r["passed"] for r in results), results
