"""The meter: every LLM call GuideDesk makes goes through `Meter.call`.

One meter per unit of work — a customer turn, a playground run, a batch job (insights), a
benchmark run. Before each call it checks the caps (the worst case of this call — its prompt plus
`LLM_MAX_COMPLETION_TOKENS` — against the unit's token cap) and the client's monthly budget;
after it, it records the `UsageRecord` (client, purpose, mode that ran, step, model, tokens, cost,
billed amount), also for a call that failed but spent tokens. It needs neither a conversation nor
a trace: a turn passes both (and holds its monthly-budget reservation through `turn_reserve` /
`turn_commit`), anything else gets one budget check per call instead — a simulation's against
the simulations' own monthly budget (`apps.billing.services.simulations`), never the live one.

A meter belongs to one unit of work and one thread; it keeps no module-level state, so units
can run concurrently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.billing.models import UsagePurpose, UsageRecord, UsageReservation
from apps.billing.services import usage_record_create, usage_records_rebill
from apps.billing.services.budgets import (
    UsageLimitReached,
    plan_is_budgeted,
    turn_budget_commit,
    turn_budget_reserve,
    turn_token_estimate,
    usage_budget_add,
    usage_budget_check,
)
from apps.billing.services.simulations import simulation_budget_add, simulation_budget_check
from apps.clients.models import Client
from apps.reasoning.llm import (
    TOKENS_PER_MESSAGE,
    LLMError,
    LLMResult,
    estimate_tokens,
    llm_complete,
)

__all__ = ["PLAN_CAP", "Meter", "TokenCapExceeded", "UsageLimitReached"]

logger = logging.getLogger(__name__)


class TokenCapExceeded(Exception):
    """The next call could take the unit of work past its token cap; it is not made."""

    def __init__(self, step: str, detail: str = "") -> None:
        super().__init__(step)
        self.step = step
        self.detail = detail


class _PlanCap:
    def __repr__(self) -> str:
        return "PLAN_CAP"


PLAN_CAP: Any = _PlanCap()  # default token cap: the plan's per-turn cap (see Meter)


def _worst_case(messages: list[dict[str, str]]) -> int:
    prompt = sum(estimate_tokens(m.get("content", "")) + TOKENS_PER_MESSAGE for m in messages)
    return prompt + int(settings.LLM_MAX_COMPLETION_TOKENS)


class Meter:
    """Meters the LLM calls of one unit of work.

    `mode` is the mode that runs (records are billed at the plan's multiplier for it).
    `token_cap`: the most tokens the unit may use — by default the plan's per-turn cap, or on a
    plan with a monthly budget what a turn reserves; `None` for no cap. `spent` counts tokens
    an earlier attempt of the same unit already used (a turn taken over from a dead worker).
    """

    def __init__(
        self,
        *,
        client: Client,
        mode: str,
        purpose: str = UsagePurpose.TURN,
        conversation: Any = None,
        trace: Any = None,
        token_cap: int | None = PLAN_CAP,
        spent: int = 0,
    ) -> None:
        if purpose == UsagePurpose.TURN and trace is None:
            raise ValueError("a turn's meter needs its trace")
        self.client = client
        self.mode = mode
        self.purpose = purpose
        self.conversation = conversation
        self.trace = trace
        self.token_cap: int | None = None
        if token_cap is PLAN_CAP:
            self.plan_cap_for(mode)
        else:
            self.token_cap = token_cap or None
        self.tokens_used = spent
        self.calls = 0
        # What the recorded calls cost and bill (the trace's recorder adds it to the trace).
        self.cost_usd = Decimal(0)
        self.billed_usd = Decimal(0)
        self.llm_wait_ms = 0
        self.offline = False
        self.model = ""
        # The mode whose multiplier the calls bill at, when not `mode`'s (`bill_as`).
        self.billed_as: str | None = None

    def plan_cap_for(self, mode: str) -> None:
        """Run as `mode` with the plan's cap for it: its per-turn cap, or on a plan with a
        monthly budget what a turn of that mode reserves (a deliberative plan's turn that the
        per-visitor limits run in adaptive mode gets an adaptive turn's cap)."""
        plan = self.client.plan
        self.mode = mode
        self.token_cap = (
            plan.per_turn_token_cap
            or (turn_token_estimate(plan, mode) if plan_is_budgeted(plan) else 0)
            or None
        )

    def bill_as(self, mode: str) -> Decimal:
        """From now on bill this unit's calls at the plan's multiplier for `mode`, and re-bill
        the calls its trace already recorded likewise (a "deliberate when needed" turn that
        deliberates is billed as a deliberative turn, its adaptive pass included). Returns the
        change in the billed amount (already added to `billed_usd`)."""
        self.billed_as = mode
        if self.trace is None or self.purpose != UsagePurpose.TURN:
            return Decimal(0)
        delta = usage_records_rebill(client=self.client, trace=self.trace, billed_as=mode)
        self.billed_usd += delta
        return delta

    # -- before a call ---------------------------------------------------------------------------
    def check(self, *, step: str, messages: list[dict[str, str]]) -> None:
        """Raise `TokenCapExceeded` or `UsageLimitReached` when the call may not be made."""
        if self.token_cap is not None:
            worst = self.tokens_used + _worst_case(messages)
            if worst > self.token_cap:
                raise TokenCapExceeded(
                    step,
                    f"token cap {self.token_cap}: this call could reach {worst}; not made",
                )
        if self.purpose == UsagePurpose.SIMULATION:
            # Simulations have their own monthly budget and never touch the live one.
            simulation_budget_check(client=self.client)
        elif self.purpose != UsagePurpose.TURN:
            # A turn is admitted once, by its reservation (turn_reserve); other work per call.
            usage_budget_check(client=self.client)

    # -- the call --------------------------------------------------------------------------------
    def call[T](
        self,
        *,
        step: str,
        messages: list[dict[str, str]],
        output: type[T],
        hint: dict[str, Any] | None = None,
        tool_names: Sequence[str] | None = None,
        correction: str | None = None,
    ) -> LLMResult[T]:
        """Check, call the model through the gateway, record. `LLMError`s are re-raised after
        what they spent is recorded. `tool_names` and `correction`: see `llm_complete`."""
        self.check(step=step, messages=messages)
        started = time.perf_counter()
        try:
            result = llm_complete(
                step=step,
                messages=messages,
                output=output,
                offline_hint=hint,
                tool_names=tool_names,
                correction=correction,
            )
        except LLMError as exc:
            self.llm_wait_ms += int((time.perf_counter() - started) * 1000)
            if exc.prompt_tokens or exc.completion_tokens:  # e.g. invalid output: tokens spent
                self.record(
                    step=step,
                    model=exc.model or str(settings.LLM_MODEL),
                    prompt_tokens=exc.prompt_tokens,
                    completion_tokens=exc.completion_tokens,
                    estimated=exc.tokens_estimated,
                    cached_tokens=exc.cached_tokens,
                )
            raise
        self.llm_wait_ms += int((time.perf_counter() - started) * 1000)
        self.offline = self.offline or result.offline
        self.model = result.model
        self.record(
            step=step,
            model=result.model,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            estimated=result.tokens_estimated,
            cached_tokens=result.cached_tokens,
        )
        return result

    # -- after a call ----------------------------------------------------------------------------
    def record(
        self,
        *,
        step: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        estimated: bool,
        cached_tokens: int = 0,
    ) -> UsageRecord:
        tokens = prompt_tokens + completion_tokens
        if self.purpose == UsagePurpose.SIMULATION:
            simulation_budget_add(client=self.client, tokens=tokens)  # not the live counter
        elif self.purpose != UsagePurpose.TURN:
            usage_budget_add(client=self.client, tokens=tokens)  # a turn counts at commit
        record = usage_record_create(
            client=self.client,
            purpose=self.purpose,
            conversation=self.conversation,
            trace=self.trace,
            mode=self.mode,
            step=step,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            tokens_estimated=estimated,
            cached_tokens=cached_tokens,
            billed_as=self.billed_as,
        )
        self.tokens_used += tokens
        self.calls += 1
        self.cost_usd += Decimal(record.cost_usd)
        self.billed_usd += Decimal(record.billed_usd)
        return record

    # -- a turn's monthly budget -----------------------------------------------------------------
    def turn_reserve(self) -> UsageReservation | None:
        """Admit the turn against the monthly budgets (raises `UsageLimitReached`)."""
        return turn_budget_reserve(client=self.client, trace=self.trace)

    def turn_commit(self, reservation: UsageReservation, *, llm_calls: int) -> None:
        """Swap the turn's reservation for what it used. Never raises: the reply must not be
        lost over bookkeeping (a stale reservation is settled by the next turn)."""
        try:
            turn_budget_commit(
                client=self.client,
                reservation=reservation,
                tokens=self.tokens_used,
                llm_calls=llm_calls,
            )
        except Exception:
            trace = getattr(self.trace, "pk", None)
            logger.exception("budget commit failed", extra={"trace": trace})
