"""A finished deliberative run made of stored steps in the shapes the deliberative mode records
(docs/llm-protocol.md): reasoning steps with scores, feedback, synthesis, refinement states,
the end of deliberation. Used to test rendering, streaming and replay without the mode."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from apps.clients.models import Client
from apps.playground.models import PlaygroundRun, PlaygroundStep, RunStatus

MEANS = [0.45, 0.6, 0.7, 0.8]
DRAFT = "You can return it within 30 days. We always refund shipping too."


def deliberative_steps(max_steps: int = 10) -> list[tuple[str, dict[str, Any], int]]:
    steps: list[tuple[str, dict[str, Any], int]] = []
    for i, mean in enumerate(MEANS, start=1):
        steps.append(
            (
                "reason_step",
                {
                    "step": i,
                    "max_steps": max_steps,
                    "status": "final" if i == len(MEANS) else "continue",
                    "content": f"Reasoning {i}: what the customer needs.",
                    "scores": {"grounded": mean + 0.05, "caring": mean - 0.05},
                    "mean": mean,
                    "rationale": f"Rationale {i}.",
                },
                120,
            )
        )
        steps.append(("feedback", {"step": i, "feedback": f"Feedback {i}: cite the policy."}, 60))
    steps += [
        ("synthesize", {"response": DRAFT, "confidence": 8, "tool_call": None}, 90),
        ("refinement", {"state": "draft", "iteration": 0, "text": DRAFT}, 0),
        (
            "refinement",
            {
                "state": "critique",
                "iteration": 1,
                "score": 62,
                "critique": "One promise the policy does not make.",
                "issues": [
                    {
                        "quote": "We always refund shipping too.",
                        "problem": "the policy refunds shipping only for faulty items",
                        "kind": "false_promise",
                    }
                ],
            },
            80,
        ),
        (
            "refinement",
            {"state": "final_spec", "iteration": 1, "text": "You can return it within 30 days."},
            70,
        ),
        (
            "deliberation_end",
            {"termination": "target_reached", "steps": 4, "best_iteration": 1, "final_score": 88},
            0,
        ),
    ]
    return steps


def make_run(
    client: Client, *, status: str = RunStatus.DONE, question: str = "Can I return my boots?"
) -> PlaygroundRun:
    run = PlaygroundRun.objects.create(
        client=client,
        mode="deliberative",
        question=question,
        status=status,
        model="gpt-4o-mini",
        llm_calls=0,
        final={
            "replies": [{"text": "You can return it within 30 days.", "kind": "text", "data": {}}],
            "escalate": None,
            "confidence": 8,
        },
        cost_usd=Decimal("0.0012"),
        billed_usd=Decimal("0.0024"),
        progress_step=4,
        progress_max=10,
    )
    for index, (name, output, tokens) in enumerate(deliberative_steps()):
        add_step(run, index, name, output, tokens)
    return run


def add_step(run: PlaygroundRun, index: int, name: str, output: dict[str, Any], tokens: int = 0):
    PlaygroundStep.objects.create(
        client=run.client,
        run=run,
        index=index,
        name=name,
        output=output,
        prompt_tokens=tokens * 3 // 4,
        completion_tokens=tokens - tokens * 3 // 4,
    )
    if tokens:
        run.llm_calls += 1
        run.prompt_tokens += tokens * 3 // 4
        run.completion_tokens += tokens - tokens * 3 // 4
        PlaygroundRun.objects.unscoped("test checks the database directly").filter(
            pk=run.pk
        ).update(
            llm_calls=run.llm_calls,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
        )
