"""The builtin executor: one of GuideDesk's own handlers (`apps.tools.builtins`) runs the tool
inside a savepoint."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils.translation import gettext_noop

from apps.tools.builtins import BUILTIN_HANDLERS, ToolError
from apps.tools.executors import TIMEOUT_SETTING, Executor, ExecutorOutcome

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.tools.models import ClientTool, ToolExecution

logger = logging.getLogger(__name__)

GENERIC_BUILTIN_ERROR = "The tool failed unexpectedly. Please try again later."
MAX_ERROR_CHARS = 500


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


class BuiltinExecutor(Executor):
    type = "builtin"
    label = gettext_noop("Built-in (runs inside GuideDesk)")

    def settings_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "handler": {
                    "type": "string",
                    "enum": sorted(BUILTIN_HANDLERS),
                    "title": gettext_noop("Builtin handler"),
                    "description": gettext_noop(
                        "Only for built-in tools: the GuideDesk function that runs the tool."
                    ),
                    "x-column": "builtin_handler",
                },
                "timeout": TIMEOUT_SETTING,
            },
            "required": ["handler"],
        }

    def configured(self, tool: ClientTool) -> bool:
        return tool.builtin_handler in BUILTIN_HANDLERS

    def run(self, *, client: Client, tool: ClientTool, execution: ToolExecution) -> ExecutorOutcome:
        return run_builtin(
            tool=tool,
            client=client,
            params=execution.params,
            context={
                "conversation_id": execution.conversation_id,
                "idempotency_key": execution.idempotency_key,
            },
        )


def run_builtin(
    *,
    tool: ClientTool,
    client: Client,
    params: dict[str, Any],
    context: Mapping[str, Any],
) -> ExecutorOutcome:
    """Run the tool's built-in handler. `context` is passed to it as extra keyword arguments."""
    started = time.monotonic()
    handler = BUILTIN_HANDLERS.get(tool.builtin_handler)
    if handler is None:
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=f"Tool {tool.name!r} has no built-in handler {tool.builtin_handler!r}.",
            attempts=0,
            latency_ms=0,
        )
    try:
        # A savepoint: a handler that fails half-way leaves no writes behind, and a database
        # error inside it does not poison the caller's transaction.
        with transaction.atomic():
            result = handler(client=client, params=params, **context)
    except ToolError as exc:
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=_clip(str(exc)) or GENERIC_BUILTIN_ERROR,
            attempts=1,
            latency_ms=_elapsed_ms(started),
            refused=True,
            error_code=exc.code,
        )
    except Exception:
        logger.exception(
            "builtin tool handler crashed",
            extra={"tool": tool.name, "handler": tool.builtin_handler},
        )
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=GENERIC_BUILTIN_ERROR,
            attempts=1,
            latency_ms=_elapsed_ms(started),
        )
    if not isinstance(result, dict):
        logger.error(
            "builtin tool handler returned %s, not a dict",
            type(result).__name__,
            extra={"tool": tool.name, "handler": tool.builtin_handler},
        )
        return ExecutorOutcome(
            ok=False,
            result=None,
            error=GENERIC_BUILTIN_ERROR,
            attempts=1,
            latency_ms=_elapsed_ms(started),
        )
    return ExecutorOutcome(
        ok=True, result=result, error="", attempts=1, latency_ms=_elapsed_ms(started)
    )


EXECUTOR = BuiltinExecutor()
