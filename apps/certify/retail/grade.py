"""Grade one retail task: the final database state, and what the customer was told.

A run passes when
1. the final world's digest equals the digest of the initial world with the task's expected
   actions applied (nothing more, nothing less, the same amounts and payment methods), and
2. every required output (an amount, a status) appears in the agent's messages.

`transcript` is the text of the agent's messages only (the customer's own words do not count:
a customer who states the amount has not been told it). Numbers are compared without thousands
separators, text without regard to case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from apps.certify.retail.tasks import Task, apply_actions
from apps.certify.retail.world import World

MAX_DIFFERENCES = 10


@dataclass
class Grade:
    passed: bool
    reasons: list[str] = field(default_factory=list)
    expected_digest: str = ""
    final_digest: str = ""


def _normalise(text: str) -> str:
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,234.56 -> 1234.56
    return re.sub(r"\s+", " ", text).lower()


def told(output: str, transcript: str) -> bool:
    """Whether `output` appears in `transcript`, as a whole word or number."""
    needle = re.escape(_normalise(output))
    return re.search(rf"(?<![\w.]){needle}(?![\w]|\.\d)", _normalise(transcript)) is not None


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where two state documents differ, as `path: expected X, found Y` lines."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[str] = []
        for key in sorted(set(expected) | set(actual), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                found.append(f"{where}: missing")
            elif key not in expected:
                found.append(f"{where}: unexpected")
            else:
                found.extend(differences(expected[key], actual[key], where))
        return found
    if expected != actual:
        return [f"{path}: expected {expected!r}, found {actual!r}"]
    return []


def grade(initial: World, final: World, transcript: str, task: Task) -> Grade:
    expected = apply_actions(initial, task.actions)
    result = Grade(passed=True, expected_digest=expected.digest(), final_digest=final.digest())
    if result.expected_digest != result.final_digest:
        result.passed = False
        found = differences(expected.state(), final.state())
        result.reasons.append("The final database state is not the expected one.")
        result.reasons.extend(found[:MAX_DIFFERENCES])
        if len(found) > MAX_DIFFERENCES:
            result.reasons.append(f"… and {len(found) - MAX_DIFFERENCES} more differences.")
    for output in task.outputs:
        if not told(output, transcript):
            result.passed = False
            result.reasons.append(f"The customer was not told {output!r}.")
    return result
