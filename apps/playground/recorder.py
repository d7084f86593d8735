"""The playground's turn journal: `TurnRecorder`'s interface (the modes call `llm`, `step`,
`internal`, `ensure_open`), with the steps stored on a `PlaygroundRun` instead of a conversation's
trace, usage recorded with purpose `playground`, and staff's stop button in place of a takeover."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from apps.billing.models import UsagePurpose, UsageRecord
from apps.billing.services.budgets import plan_is_budgeted
from apps.clients.models import AIMode
from apps.conversations.events import publish, push_enabled
from apps.conversations.models import Conversation
from apps.playground.models import PlaygroundRun, PlaygroundStep
from apps.reasoning.meter import Meter
from apps.reasoning.traces import TurnAborted, TurnRecorder

__all__ = ["CHANNEL_PREFIX", "PlaygroundMeter", "PlaygroundRecorder", "run_changed"]

CHANNEL_PREFIX = "guidedesk:playground:"
MAX_NOTES = 200

StepListener = Callable[[PlaygroundStep], None]


def run_changed(run_id: int) -> None:
    """Wake the run's event streams (Redis pub/sub) once the current transaction commits; the
    streams poll when there is no Redis."""
    if push_enabled():
        transaction.on_commit(lambda: publish(run_id, prefix=CHANNEL_PREFIX))


def run_token_cap(run: PlaygroundRun) -> int | None:
    """The cap a customer turn in the run's mode would have: the plan's per-turn cap, or on a
    plan with a monthly budget what such a turn reserves (a deliberative turn reserves more)."""
    plan = run.client.plan
    if plan.per_turn_token_cap:
        return int(plan.per_turn_token_cap)
    if not plan_is_budgeted(plan):
        return None
    deliberative = run.mode == AIMode.DELIBERATIVE
    return int(
        settings.BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE
        if deliberative
        else settings.BILLING_TURN_TOKEN_RESERVE
    )


class PlaygroundMeter(Meter):
    """The meter of a playground run: caps and the monthly budget are checked before every call
    (purpose `playground`); each call's cost is added to the run as it is recorded."""

    def __init__(self, *, run: PlaygroundRun) -> None:
        super().__init__(
            client=run.client,
            mode=run.mode,
            purpose=UsagePurpose.PLAYGROUND,
            token_cap=run_token_cap(run),
        )
        self.run = run

    def record(
        self, *, step: str, model: str, prompt_tokens: int, completion_tokens: int, estimated: bool
    ) -> UsageRecord:
        record = super().record(
            step=step,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            estimated=estimated,
        )
        PlaygroundRun.objects.filter(pk=self.run.pk, client_id=self.run.client_id).update(
            cost_usd=F("cost_usd") + record.cost_usd, billed_usd=F("billed_usd") + record.billed_usd
        )
        self.run.cost_usd += record.cost_usd
        self.run.billed_usd += record.billed_usd
        return record


class PlaygroundRecorder(TurnRecorder):
    # `trace` is the run: the modes update the same counters on it (critique_reasons, …).
    trace: Any

    def __init__(self, *, run: PlaygroundRun, listeners: list[StepListener] | None = None):
        self.trace = run
        self.run = run
        self.client = run.client
        # Read-only context (an unsaved stand-in without one): a run never writes to it.
        self.conversation = run.conversation or Conversation(client=run.client)
        self.mode = run.mode
        last = run.steps.order_by("-index").values_list("index", flat=True).first()
        self._index = 0 if last is None else last + 1
        self.meter = PlaygroundMeter(run=run)
        self.listeners = list(listeners or [])

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
    ) -> Any:  # a PlaygroundStep (the modes ignore what `step` returns)
        step = PlaygroundStep.objects.create(
            client=self.client,
            run=self.run,
            index=self._index,
            name=name[:40],
            input_summary=input_summary[:4000],
            output=output if isinstance(output, dict) else {"value": output},
            error=error[:4000],
            latency_ms=latency_ms,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        self._index += 1
        run_changed(self.run.pk)
        for listener in self.listeners:
            listener(step)
        return step

    def internal(self, kind: str, text: str, data: dict[str, Any] | None = None) -> Any:
        """What a turn posts as an internal message is kept on the run (nothing is posted)."""
        note = {"kind": kind, "text": text[:4000], "data": data or {}}
        if len(self.run.notes) < MAX_NOTES:
            self.run.notes.append(note)
            PlaygroundRun.objects.filter(pk=self.run.pk, client_id=self.run.client_id).update(
                notes=self.run.notes
            )
        return note

    def ensure_open(self) -> None:
        """Checked before every LLM call (and where a turn would run a tool): the run stops at
        the next step once staff pressed stop."""
        if PlaygroundRun.objects.filter(
            pk=self.run.pk, client_id=self.run.client_id, stop_requested=True
        ).exists():
            self.step("stopped", output={"reason": "stopped from the playground"})
            raise TurnAborted()

    def progress(self, step: int, max_steps: int) -> None:
        self.run.progress_step, self.run.progress_max = step, max_steps
        PlaygroundRun.objects.filter(pk=self.run.pk, client_id=self.run.client_id).update(
            progress_step=step, progress_max=max_steps
        )
        run_changed(self.run.pk)

    def _count(self, prompt: int, completion: int) -> None:
        PlaygroundRun.objects.filter(pk=self.run.pk, client_id=self.run.client_id).update(
            llm_calls=F("llm_calls") + 1,
            prompt_tokens=F("prompt_tokens") + prompt,
            completion_tokens=F("completion_tokens") + completion,
        )
        self.run.llm_calls += 1
        self.run.prompt_tokens += prompt
        self.run.completion_tokens += completion
