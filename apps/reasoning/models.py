from __future__ import annotations

import operator
from functools import reduce
from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk, status_field
from apps.core.models import TenantOwnedModel


class TraceStatus(models.TextChoices):
    PROCESSING = "processing", _("Processing")
    DONE = "done", _("Done")
    SKIPPED = "skipped", _("Skipped — a human owns the conversation")
    FAILED = "failed", _("Failed — fallback posted")
    STOPPED = "stopped", _("Stopped by staff (playground)")


class TraceKind(models.TextChoices):
    """What a trace belongs to; exactly that owner's link is set (a check constraint)."""

    TURN = "turn", _("Conversation turn")
    PLAYGROUND = "playground", _("Playground run")
    SIMULATION = "simulation", _("Simulation turn")


# The links each kind of trace sets; every other owner link stays empty (a check constraint).
OWNER_LINKS = {
    TraceKind.TURN: ("conversation", "user_message"),
    TraceKind.PLAYGROUND: ("playground_run",),
    TraceKind.SIMULATION: ("case_run",),
}


def owner_matches_kind(kind: TraceKind) -> models.Q:
    """A trace of `kind`: its own owner links set, every other owner link empty."""
    own = OWNER_LINKS[kind]
    every = [link for links in OWNER_LINKS.values() for link in links]
    return models.Q(kind=kind, **{f"{link}__isnull": link not in own for link in every})


class DeliberationTrigger(models.TextChoices):
    """Why a "deliberate when needed" turn deliberated (apps/reasoning/modes/as_needed.py)."""

    LOW_CONFIDENCE = "low_confidence", _("Low confidence")
    COMPLAINT = "complaint", _("A complaint or dispute")
    CRITIQUE_ESCALATE = "critique_escalate", _("The critique would hand over")
    EVALUATION_QUESTIONED = "evaluation_questioned", _("The evaluation questioned the draft")


class ReasoningTrace(TenantOwnedModel):
    """The journal of one run of the reasoning pipeline, whoever asked for it (`kind`):

    - a conversation *turn* — the processing of one customer message; one per message (the
      unique key makes a redelivered task find the turn it already ran);
    - a *playground* run (apps.playground) — a turn outside any conversation;
    - a *simulation* turn (apps.simulations) — one turn of a sandboxed test conversation
      (`case_run`; a case run has one trace per turn).

    Its steps (`ReasoningStep`) and its counters — LLM calls, tokens, cost, latency — are kept
    here for every owner, once."""

    kind = models.CharField(
        max_length=12, choices=TraceKind.choices, default=TraceKind.TURN, verbose_name=_("kind")
    )
    conversation = optional_fk(
        "conversations.Conversation",
        _("conversation"),
        on_delete=models.CASCADE,
        related_name="traces",
    )
    user_message = optional_fk(
        "conversations.Message",
        _("user message"),
        on_delete=models.CASCADE,
        related_name="turn",
        one_to_one=True,
    )
    # A string reference: the playground sits above reasoning and is never imported from here.
    playground_run = optional_fk(
        "playground.PlaygroundRun",
        _("playground run"),
        on_delete=models.CASCADE,
        related_name="trace",
        one_to_one=True,
    )
    # A string reference, as above: simulations sit above reasoning.
    case_run = optional_fk(
        "simulations.CaseRun", _("case run"), on_delete=models.CASCADE, related_name="traces"
    )
    mode = models.CharField(max_length=20, verbose_name=_("mode"))
    model = models.CharField(max_length=100, blank=True, verbose_name=_("model"))
    status = status_field(TraceStatus.PROCESSING, max_length=12)
    critique_triggered = models.BooleanField(default=False, verbose_name=_("critique triggered"))
    critique_reasons = models.JSONField(
        default=list, blank=True, verbose_name=_("critique reasons")
    )
    context_fetched = models.JSONField(default=list, blank=True, verbose_name=_("context fetched"))
    escalated = models.BooleanField(default=False, verbose_name=_("escalated"))
    # What the evaluation step did (apps/reasoning/evaluation.py); blank = not evaluated.
    evaluation_outcome = models.CharField(
        max_length=12, blank=True, default="", verbose_name=_("evaluation outcome")
    )
    # Why a "deliberate when needed" turn deliberated (apps/reasoning/modes/as_needed.py
    # TRIGGERS); blank = it did not (or the mode was another).
    deliberation_trigger = models.CharField(
        max_length=24,
        blank=True,
        default="",
        choices=DeliberationTrigger.choices,
        verbose_name=_("deliberation trigger"),
    )
    tool_calls = models.PositiveSmallIntegerField(default=0, verbose_name=_("tool calls"))
    llm_calls = models.PositiveSmallIntegerField(default=0, verbose_name=_("llm calls"))
    prompt_tokens = models.PositiveIntegerField(default=0, verbose_name=_("prompt tokens"))
    completion_tokens = models.PositiveIntegerField(default=0, verbose_name=_("completion tokens"))
    # What the calls cost (provider) and what they bill, summed as each call is recorded.
    cost_usd = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, verbose_name=_("cost usd")
    )
    billed_usd = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, verbose_name=_("billed usd")
    )
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))
    duration_ms = models.PositiveIntegerField(default=0, verbose_name=_("duration ms"))
    llm_wait_ms = models.PositiveIntegerField(default=0, verbose_name=_("llm wait ms"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    # While a deliberative turn runs: {"step": 3, "max_steps": 10} (the widget's "Thinking it
    # through… step 3"); never the reasoning itself.
    progress = models.JSONField(default=dict, blank=True, verbose_name=_("progress"))

    class Meta:
        verbose_name = _("reasoning trace")
        verbose_name_plural = _("reasoning traces")
        indexes = [models.Index(fields=["client", "conversation", "created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=reduce(operator.or_, map(owner_matches_kind, TraceKind)),
                name="trace_owner_matches_kind",
            )
        ]

    def __str__(self) -> str:
        owner = {
            TraceKind.TURN: "Turn",
            TraceKind.PLAYGROUND: "Playground trace",
            TraceKind.SIMULATION: "Simulation turn",
        }.get(TraceKind(self.kind), "Trace")
        return f"{owner} {self.pk} ({self.mode}, {self.status})"


class ReasoningStep(TenantOwnedModel):
    """An append-only event of a trace, in order: each LLM call, guard decision, tool run."""

    trace = models.ForeignKey(
        ReasoningTrace, on_delete=models.CASCADE, related_name="steps", verbose_name=_("trace")
    )
    index = models.PositiveSmallIntegerField(verbose_name=_("index"))
    name = models.CharField(max_length=40, verbose_name=_("name"))
    input_summary = models.TextField(blank=True, verbose_name=_("input summary"))
    output = models.JSONField(default=dict, blank=True, verbose_name=_("output"))
    latency_ms = models.PositiveIntegerField(default=0, verbose_name=_("latency ms"))
    prompt_tokens = models.PositiveIntegerField(default=0, verbose_name=_("prompt tokens"))
    completion_tokens = models.PositiveIntegerField(default=0, verbose_name=_("completion tokens"))
    error = models.TextField(blank=True, verbose_name=_("error"))

    class Meta:
        verbose_name = _("reasoning step")
        verbose_name_plural = _("reasoning steps")
        ordering = ["trace", "index"]
        constraints = [models.UniqueConstraint(fields=["trace", "index"], name="uniq_step_index")]

    def __str__(self) -> str:
        return f"{self.index}. {self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Append-only: a recorded step is evidence and is never rewritten.
        if not self._state.adding:
            raise RuntimeError("ReasoningStep rows are append-only")
        super().save(*args, **kwargs)
