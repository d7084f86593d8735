"""Recording a turn: ordered, append-only ReasoningStep rows, the internal messages staff read,
and one UsageRecord per LLM call. Every LLM call of the pipeline goes through `TurnRecorder.llm`,
so nothing is spent without a record."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.db.models import F

from apps.billing.services import usage_record_create
from apps.billing.services.budgets import plan_is_budgeted, turn_token_estimate
from apps.clients.models import Client
from apps.conversations.models import (
    Conversation,
    ConversationStatus,
    Message,
    Role,
    Visibility,
)
from apps.conversations.services import message_append
from apps.reasoning.llm import LLMError, LLMResult, estimate_tokens, llm_complete
from apps.reasoning.models import ReasoningStep, ReasoningTrace


class TokenCapExceeded(Exception):
    """The next call could take the turn past its token cap; it is not made."""


class TurnAborted(Exception):
    """A person took the conversation over while the turn was running: stop, spend nothing
    more, run no tool."""


def _summary(messages: list[dict[str, str]], limit: int = 600) -> str:
    last = messages[-1]["content"] if messages else ""
    total = sum(len(m.get("content", "")) for m in messages)
    return f"{len(messages)} messages, {total} chars; last: {last[:limit]}"


class TurnRecorder:
    def __init__(self, *, trace: ReasoningTrace, client: Client, conversation: Conversation):
        self.trace = trace
        self.client = client
        self.conversation = conversation
        self.mode = trace.mode
        last = trace.steps.order_by("-index").values_list("index", flat=True).first()
        self._index = (last or 0) + (1 if last is not None else 0)
        self.llm_wait_ms = 0
        self.offline = False
        self.model = ""
        # The cap is a hard ceiling per turn: the plan's, or — on a plan with a monthly budget —
        # what the budget reserved for the turn, so no turn spends more than it reserved.
        plan = client.plan
        cap = plan.per_turn_token_cap or (
            turn_token_estimate(plan) if plan_is_budgeted(plan) else 0
        )
        self.token_cap = cap or None

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
        step = ReasoningStep.objects.create(
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
        )
        self._index += 1
        return step

    def internal(self, kind: str, text: str, data: dict[str, Any] | None = None) -> Message:
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
    ) -> LLMResult[T]:
        self.ensure_open()
        if self.token_cap is not None:
            worst_case = (
                self.tokens_used
                + sum(estimate_tokens(m.get("content", "")) + 4 for m in messages)
                + settings.LLM_MAX_COMPLETION_TOKENS
            )
            if worst_case > self.token_cap:
                self.step(
                    step,
                    error=f"per-turn token cap {self.token_cap}: this call could reach "
                    f"{worst_case}; not made",
                )
                raise TokenCapExceeded(step)
        started = time.perf_counter()
        try:
            result = llm_complete(step=step, messages=messages, output=output, offline_hint=hint)
        except LLMError as exc:
            self.llm_wait_ms += int((time.perf_counter() - started) * 1000)
            if exc.prompt_tokens or exc.completion_tokens:  # e.g. invalid output: tokens spent
                model = getattr(exc, "model", "") or settings.LLM_MODEL
                self._account(
                    step, exc.prompt_tokens, exc.completion_tokens, exc.tokens_estimated, model
                )
            self.step(
                step,
                input_summary=_summary(messages),
                output={"raw": exc.raw[:2000]} if exc.raw else {},
                error=f"{exc.kind}: {exc.message}",
                latency_ms=exc.latency_ms,
                prompt_tokens=exc.prompt_tokens,
                completion_tokens=exc.completion_tokens,
            )
            raise
        self.llm_wait_ms += int((time.perf_counter() - started) * 1000)
        self.offline = self.offline or result.offline
        self.model = result.model
        self._account(
            step,
            result.prompt_tokens,
            result.completion_tokens,
            result.tokens_estimated,
            result.model,
        )
        parsed = result.parsed
        dump = parsed.model_dump() if hasattr(parsed, "model_dump") else {"value": str(parsed)}
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
        """Re-checked before every LLM call and tool run: staff may take over mid-turn."""
        still_open = Conversation.objects.filter(
            pk=self.conversation.pk, status=ConversationStatus.OPEN
        ).exists()
        if not still_open:
            self.step("aborted", output={"reason": "a person took over the conversation"})
            raise TurnAborted()

    @property
    def tokens_used(self) -> int:
        return self.trace.prompt_tokens + self.trace.completion_tokens

    def _account(
        self, step: str, prompt: int, completion: int, estimated: bool, model: str
    ) -> None:
        usage_record_create(
            client=self.client,
            conversation=self.conversation,
            trace=self.trace,
            mode=self.mode,
            step=step,
            model=model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            tokens_estimated=estimated,
        )
        ReasoningTrace.objects.filter(pk=self.trace.pk).update(
            llm_calls=F("llm_calls") + 1,
            prompt_tokens=F("prompt_tokens") + prompt,
            completion_tokens=F("completion_tokens") + completion,
        )
        self.trace.llm_calls += 1
        self.trace.prompt_tokens += prompt
        self.trace.completion_tokens += completion


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
