"""The commit-message rule CI checks (scripts/check_commit_messages.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_commit_messages.py"
_spec = importlib.util.spec_from_file_location("check_commit_messages", SCRIPT)
assert _spec and _spec.loader
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def test_a_subject_with_an_area_and_a_body_passes() -> None:
    assert check.problems("notes: mask links on write\n\nA link in a note reached prompts.\n") == []


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("notes: " + "x" * 80 + "\n\nwhy\n", "characters"),
        ("Mask links on write\n\nwhy\n", "area: what changed"),
        ("notes: mask links on write\n", "no body"),
        ("notes: mask links on write\nwhy, with no blank line\n", "no body"),
    ],
)
def test_each_broken_rule_is_named(message: str, expected: str) -> None:
    found = check.problems(message)
    assert any(expected in problem for problem in found), found
