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
from apps.tools.executors import TIMEOUT_SETTING, Executor, ExecutorOutcome, clip_error, elapsed_ms

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.tools.models import ClientTool, ToolExecution

logger = logging.getLogger(__name__)

GENERIC_BUILTIN_ERROR = "The tool failed unexpectedly. Please try again later."


def _failed(started: float, error: str = GENERIC_BUILTIN_ERROR, **flags: Any) -> ExecutorOutcome:
    return ExecutorOutcome(
        ok=False, result=None, error=error, attempts=1, latency_ms=elapsed_ms(started), **flags
    )


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
        return ExecutorOutcome.not_run(
            f"Tool {tool.name!r} has no built-in handler {tool.builtin_handler!r}."
        )
    try:
        # A savepoint: a handler that fails half-way leaves no writes behind, and a database
        # error inside it does not poison the caller's transaction.
        with transaction.atomic():
            result = handler(client=client, params=params, **context)
    except ToolError as exc:
        return _failed(
            started,
            clip_error(str(exc)) or GENERIC_BUILTIN_ERROR,
            refused=True,
            error_code=exc.code,
        )
    except Exception:
        logger.exception(
            "builtin tool handler crashed",
            extra={"tool": tool.name, "handler": tool.builtin_handler},
        )
        return _failed(started)
    if not isinstance(result, dict):
        logger.error(
            "builtin tool handler returned %s, not a dict",
            type(result).__name__,
            extra={"tool": tool.name, "handler": tool.builtin_handler},
        )
        return _failed(started)
    return ExecutorOutcome(
        ok=True, result=result, error="", attempts=1, latency_ms=elapsed_ms(started)
    )


EXECUTOR = BuiltinExecutor()
