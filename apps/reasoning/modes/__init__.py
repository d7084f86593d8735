"""The reasoning modes, one module each (`standard`, `adaptive`, `deliberative`). A mode composes
steps (`apps/reasoning/steps/`) and ends with a draft outcome; the post-draft hooks
(`apps.reasoning.hooks`) run after it.

Adding a mode means adding one module here that defines `MODE = Mode(...)`
(`apps.clients.modes.Mode`: name, label, summary, the steps it runs, its default billing
multiplier, its cost rank, the internal message kinds it writes, what it does — whether it
streams, whether it deliberates, the token reserve it takes, its chart colour, its admin help —
and `run(turn)`). Streaming, billing, the plan admin and the usage charts read those
declarations, never a list of mode names. Modules whose
name starts with `_` are helpers. Every other module is imported and registered in the mode
registry (`apps.clients.modes`) when this package is — which `ReasoningConfig.ready` does at
start-up, so plans, the admin and the tenant import see every mode; a module without a complete
`MODE` fails that import.

`mode_that_runs` is the one place that maps a plan's AI mode to the mode actually run — and
recorded on the trace, and billed. An unknown mode falls back to adaptive."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from apps.clients import modes as registry
from apps.clients.models import AIMode
from apps.clients.modes import Mode

if TYPE_CHECKING:
    from apps.reasoning.turn import Outcome, Turn

__all__ = ["FALLBACK", "Mode", "discover", "mode_that_runs", "runner"]

FALLBACK = AIMode.ADAPTIVE

type Runner = Callable[["Turn"], "Outcome"]


def discover(package: str) -> list[Mode]:
    """Import every non-underscore module of `package` and register its `MODE`."""
    return registry.discover(package)


def mode_that_runs(ai_mode: str) -> str:
    """The mode a plan's turns run, are recorded and are billed as."""
    return str(ai_mode) if ai_mode in registry.names() else str(FALLBACK)


def runner(mode: str) -> Runner:
    """The function that runs a turn in `mode` (after `mode_that_runs`)."""
    return registry.get(mode_that_runs(mode)).run


discover(__name__)
