"""The trace journal: ordered, append-only ReasoningStep rows of one ReasoningTrace and the
internal messages staff read. Every LLM call of the pipeline goes through `TurnRecorder.llm`,
which meters it (`apps.reasoning.meter`: caps, budget, one UsageRecord per call), journals it and
adds its calls, tokens and cost to the trace.

One recorder serves every owner of a trace. A conversation turn is the default; another owner
(a playground run) passes a `TraceOwner`, which decides whether the run may go on, where
internal notes go and who hears of each recorded step, and its own `Meter`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Protocol

from django.db import connection
from django.db.models import F

from apps.billing.models import UsagePurpose
from apps.clients.models import Client
from apps.conversations.models import (
    Conversation,
    ConversationStatus,
    Role,
    Visibility,
)
from apps.conversations.services import message_append
from apps.core.tenant_sql import sql_insert, sql_rows
from apps.reasoning.llm import LLMError, LLMResult
from apps.reasoning.meter import Meter, TokenCapExceeded
from apps.reasoning.models import ReasoningStep, ReasoningTrace

__all__ = [
    "StepListener",
    "TokenCapExceeded",
    "TraceOwner",
    "TurnAborted",
    "TurnRecorder",
    "pretty",
]

StepListener = Callable[[ReasoningStep], None]


class TurnAborted(Exception):
    """The run must stop now — a person took the conversation over, or staff pressed stop in
    the playground: spend nothing more, run no tool."""


class TraceOwner(Protocol):
    """What the owner of a trace other than a conversation turn decides (see the module)."""

    def ensure_open(self, recorder: TurnRecorder) -> None:
        """Raise `TurnAborted` (after recording why) when the run must stop."""

    def internal(self, kind: str, text: str, data: dict[str, Any]) -> Any:
        """Keep what a turn would post as an internal message."""

    def step_recorded(self, step: ReasoningStep) -> None:
        """Called after each step is stored (e.g. to wake the owner's event streams)."""


def _summary(messages: list[dict[str, str]], limit: int = 600) -> str:
    last = messages[-1]["content"] if messages else ""
    total = sum(len(m.get("content", "")) for m in messages)
    return f"{len(messages)} messages, {total} chars; last: {last[:limit]}"


class TurnRecorder:
    def __init__(
        self,
        *,
        trace: ReasoningTrace,
        client: Client,
        conversation: Conversation,
        next_index: int | None = None,
        owner: TraceOwner | None = None,
        meter: Meter | None = None,
        listeners: list[StepListener] | None = None,
    ):
        """`next_index`: the index of the trace's next step when the caller knows it (0 for a
        trace it just created); else it is read from the trace's steps. `owner` and `meter`:
        for a trace that is not a conversation turn (the turn's are the defaults). `listeners`
        hear of each step once it is stored (`manage.py reason` prints it)."""
        self.trace = trace
        self.client = client
        self.conversation = conversation
        self.mode = trace.mode
        self.owner = owner
        self.listeners = list(listeners or [])
        if next_index is None:
            last = trace.steps.order_by("-index").values_list("index", flat=True).first()
            next_index = 0 if last is None else last + 1
        self._index = next_index
        # The caller has just read the conversation as open, with nothing that waits since:
        # the next `ensure_open` need not read it again (see there).
        self.open_just_read = False
        # The meter enforces the per-turn token cap and records usage at the mode that runs.
        self.meter = meter or Meter(
            client=client,
            mode=trace.mode,
            purpose=UsagePurpose.TURN,
            conversation=conversation,
            trace=trace,
            spent=trace.prompt_tokens + trace.completion_tokens,
        )
        # What the meter had cost when it was last added to the trace (see `_count`).
        self._counted_cost = (self.meter.cost_usd, self.meter.billed_usd)

    @property
    def token_cap(self) -> int | None:
        return self.meter.token_cap

    @property
    def llm_wait_ms(self) -> int:
        return self.meter.llm_wait_ms

    @property
    def offline(self) -> bool:
        return self.meter.offline

    @property
    def model(self) -> str:
        return self.meter.model

    # -- steps ---------------------------------------------------------------------------------
    def step(
        self,
        name: str,
        *,
        input_summary: str = "",
        output: Any = None,
        error: str = "",
        latency_ms: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> ReasoningStep:
        step = sql_insert(
            "reasoning.step_insert",
            ReasoningStep(
                client=self.client,
                trace=self.trace,
                index=self._index,
                name=name,
                input_summary=input_summary[:4000],
                output=output if isinstance(output, dict) else {"value": output},
                error=error[:4000],
                latency_ms=latency_ms,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            ),
        )
        self._index += 1
        if self.owner is not None:
            self.owner.step_recorded(step)
        for listener in self.listeners:
            listener(step)
        return step

    def internal(self, kind: str, text: str, data: dict[str, Any] | None = None) -> Any:
        """A conversation turn posts an internal message (returned); another owner keeps it
        its own way."""
        if self.owner is not None:
            return self.owner.internal(kind, text, data or {})
        # Tool traffic is the tool's; guard decisions are GuideDesk's own code, not the model's.
        role = {"tool_call": Role.TOOL, "tool_result": Role.TOOL, "guard": Role.SYSTEM}.get(
            kind, Role.ASSISTANT
        )
        return message_append(
            client=self.client,
            conversation=self.conversation,
            role=role,
            kind=kind,
            visibility=Visibility.INTERNAL,
            text=text,
            data=data or {},
            trace=self.trace,
        )

    # -- LLM -----------------------------------------------------------------------------------
    def llm[T](
        self,
        *,
        step: str,
        messages: list[dict[str, str]],
        output: type[T],
        hint: dict[str, Any] | None = None,
        extra: dict[str, Any] | Callable[[T], dict[str, Any]] | None = None,
        tool_names: Sequence[str] | None = None,
        correction: str | None = None,
    ) -> LLMResult[T]:
        """One metered LLM call, journalled as a step named after it. `extra` (a dict, or a
        function of the parsed reply) is merged into the recorded step's output — e.g.
        deliberative mode's step number and the mean over the rubric's principles.
        `tool_names` and `correction`: see `llm_complete`. What the gateway reports beyond the
        reply (a refused response_format, a prompt shrunk to fit the context window) is added
        to the recorded step's output, and a correction the call carried as `correction`."""
        self.ensure_open()
        try:
            result = self.meter.call(
                step=step,
                messages=messages,
                output=output,
                hint=hint,
                tool_names=tool_names,
                correction=correction,
            )
        except TokenCapExceeded as exc:
            self.step(step, error=f"per-turn {exc.detail}")
            raise
        except LLMError as exc:
            if exc.prompt_tokens or exc.completion_tokens:  # metered: tokens were spent
                self._count(exc.prompt_tokens, exc.completion_tokens)
            failed: dict[str, Any] = {"raw": exc.raw[:2000]} if exc.raw else {}
            failed.update(exc.details)
            if correction:
                failed["correction"] = correction
            self.step(
                step,
                input_summary=_summary(messages),
                output=failed,
                error=f"{exc.kind}: {exc.message}",
                latency_ms=exc.latency_ms,
                prompt_tokens=exc.prompt_tokens,
                completion_tokens=exc.completion_tokens,
            )
            raise
        self._count(result.prompt_tokens, result.completion_tokens)
        parsed = result.parsed
        dump = parsed.model_dump() if hasattr(parsed, "model_dump") else {"value": str(parsed)}
        if extra:
            dump = {**dump, **(extra(parsed) if callable(extra) else extra)}
        if result.details:
            dump = {**dump, **result.details}
        if correction:
            dump = {**dump, "correction": correction}
        self.step(
            step,
            input_summary=_summary(messages),
            output=dump,
            latency_ms=result.latency_ms,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )
        return result

    def ensure_open(self) -> None:
        """Re-checked before every LLM call and tool run: staff may take over mid-turn. The
        first check may use the status the turn read at its start (`open_just_read`): nothing
        waited in between (no model call, no webhook), and whatever is decided, the status is
        read again under the row lock before anything is posted. Another owner decides for
        itself (the playground: staff's stop button)."""
        if self.owner is not None:
            self.owner.ensure_open(self)
            return
        if self.open_just_read:
            self.open_just_read = False
            return
        still_open = Conversation.objects.filter(
            pk=self.conversation.pk,
            client_id=self.conversation.client_id,
            status=ConversationStatus.OPEN,
        ).exists()
        if not still_open:
            self.step("aborted", output={"reason": "a person took over the conversation"})
            raise TurnAborted()

    @property
    def tokens_used(self) -> int:
        return self.trace.prompt_tokens + self.trace.completion_tokens

    def bill_as(self, mode: str) -> None:
        """Bill the turn at the plan's multiplier for `mode` from now on, its calls so far
        included (`Meter.bill_as`); the trace's billed amount follows at once."""
        delta = self.meter.bill_as(mode)
        self._counted_cost = (self._counted_cost[0], self._counted_cost[1] + delta)
        if delta:
            ReasoningTrace.objects.filter(pk=self.trace.pk, client_id=self.trace.client_id).update(
                billed_usd=F("billed_usd") + delta
            )
            self.trace.billed_usd += delta

    def _count(self, prompt: int, completion: int) -> None:
        """Add one call (its tokens and what the meter recorded it cost) to the trace, in the
        same UPDATE (plain SQL: every call of every turn runs it; docs/benchmarks.md)."""
        cost, billed = self.meter.cost_usd, self.meter.billed_usd
        cost_delta: Decimal = cost - self._counted_cost[0]
        billed_delta: Decimal = billed - self._counted_cost[1]
        self._counted_cost = (cost, billed)
        sql_rows(
            "reasoning.trace_count",
            _count_sql(),
            [prompt, completion, cost_delta, billed_delta, self.trace.pk, self.trace.client_id],
            client_id=self.trace.client_id,
        )
        self.trace.llm_calls += 1
        self.trace.prompt_tokens += prompt
        self.trace.completion_tokens += completion
        self.trace.cost_usd += cost_delta
        self.trace.billed_usd += billed_delta


@functools.cache
def _count_sql() -> str:
    """One call added to a trace (id AND client_id). The sums of money are cast to NUMERIC as
    the ORM casts them, so SQLite adds them as decimals too."""
    return (
        f"UPDATE {connection.ops.quote_name(ReasoningTrace._meta.db_table)} SET"  # noqa: S608
        " llm_calls = llm_calls + 1, prompt_tokens = prompt_tokens + %s,"
        " completion_tokens = completion_tokens + %s,"
        " cost_usd = CAST(cost_usd + %s AS NUMERIC), billed_usd = CAST(billed_usd + %s AS NUMERIC)"
        " WHERE id = %s AND client_id = %s"
    )


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
