"""One structured JSON log event per reasoning step (the dharma seed's telemetry), through
Python `logging` (logger `guidedesk.reasoning`), so any log pipeline takes it:

    {"event": "reasoning_step", "runId", "stepIndex", "maxSteps", "modelSelfScore",
     "modelScoreBreakdown", "targetThreshold", "targetReached", "terminationReason",
     "latencyMs", "feedbackLength", "clientId", "conversationId"}

The message is the JSON itself (grep-able as in the seed); the same dict is attached to the
record as `telemetry` for structured handlers."""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger("guidedesk.reasoning")


def reasoning_step_event(
    *,
    run_id: str,
    step: int,
    max_steps: int,
    mean: float,
    scores: dict[str, float],
    target: float,
    termination: str | None,
    latency_ms: int,
    feedback_length: int,
    client_id: int | None,
    conversation_id: int | None,
) -> dict[str, Any]:
    event = {
        "event": "reasoning_step",
        "runId": run_id,
        "stepIndex": step,
        "maxSteps": max_steps,
        "modelSelfScore": f"{mean:.3f}",
        "modelScoreBreakdown": {k: f"{v:.2f}" for k, v in scores.items()},
        "targetThreshold": target,
        "targetReached": mean >= target,
        "terminationReason": termination,
        "latencyMs": latency_ms,
        "feedbackLength": feedback_length,
        "clientId": client_id,
        "conversationId": conversation_id,
    }
    logger.info(json.dumps(event, separators=(",", ":")), extra={"telemetry": event})
    return event
