"""The reasoning modes. A mode composes steps (`apps/reasoning/steps/`) and ends with a draft
outcome; the post-draft hooks (`apps.reasoning.hooks`) run after it.

`mode_that_runs` is the one place that maps a plan's AI mode to the mode actually run — and
recorded on the trace, and billed. All three modes are built; an unknown mode falls back to
adaptive."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from apps.clients.models import AIMode

if TYPE_CHECKING:
    from apps.reasoning.turn import Outcome, Turn

__all__ = ["BUILT", "mode_that_runs"]

# The modes that exist; kept in step with `RUNNERS` in `apps.reasoning.services`.
BUILT: tuple[str, ...] = (AIMode.STANDARD, AIMode.ADAPTIVE, AIMode.DELIBERATIVE)
FALLBACK = AIMode.ADAPTIVE

type Runner = Callable[["Turn"], "Outcome"]


def mode_that_runs(ai_mode: str) -> str:
    """The mode a plan's turns run, are recorded and are billed as."""
    return str(ai_mode) if ai_mode in BUILT else str(FALLBACK)
