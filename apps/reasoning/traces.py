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
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role, Visibility
from apps.conversations.services import message_append
from apps.reasoning.llm import LLMError, LLMResult, llm_complete
from apps.reasoning.models import ReasoningStep, ReasoningTrace


class TokenCapExceeded(Exception):
    """The per-turn token cap of the plan was reached; no further LLM call is made."""


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
        cap = client.plan.per_turn_token_cap
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
        if self.token_cap is not None and self.tokens_used >= self.token_cap:
            self.step(step, error=f"per-turn token cap {self.token_cap} reached; call not made")
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
