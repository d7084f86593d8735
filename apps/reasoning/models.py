from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TenantOwnedModel


class TraceStatus(models.TextChoices):
    PROCESSING = "processing", "Processing"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Skipped — a human owns the conversation"
    FAILED = "failed", "Failed — fallback posted"
    STOPPED = "stopped", "Stopped by staff (playground)"


class TraceKind(models.TextChoices):
    """What a trace belongs to; exactly that owner's link is set (a check constraint)."""

    TURN = "turn", "Conversation turn"
    PLAYGROUND = "playground", "Playground run"
    SIMULATION = "simulation", "Simulation turn"


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

    kind = models.CharField(max_length=12, choices=TraceKind.choices, default=TraceKind.TURN)
    conversation = models.ForeignKey(
        "conversations.Conversation",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="traces",
    )
    user_message = models.OneToOneField(
        "conversations.Message",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="turn",
    )
    # A string reference: the playground sits above reasoning and is never imported from here.
    playground_run = models.OneToOneField(
        "playground.PlaygroundRun",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="trace",
    )
    # A string reference, as above: simulations sit above reasoning.
    case_run = models.ForeignKey(
        "simulations.CaseRun",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="traces",
    )
    mode = models.CharField(max_length=20)
    model = models.CharField(max_length=100, blank=True)
    status = models.CharField(
        max_length=12, choices=TraceStatus.choices, default=TraceStatus.PROCESSING
    )
    critique_triggered = models.BooleanField(default=False)
    critique_reasons = models.JSONField(default=list, blank=True)
    context_fetched = models.JSONField(default=list, blank=True)
    escalated = models.BooleanField(default=False)
    # What the evaluation step did (apps/reasoning/evaluation.py); blank = not evaluated.
    evaluation_outcome = models.CharField(max_length=12, blank=True, default="")
    # Why a "deliberate when needed" turn deliberated (apps/reasoning/modes/as_needed.py
    # TRIGGERS); blank = it did not (or the mode was another).
    deliberation_trigger = models.CharField(
        max_length=24, blank=True, default="", choices=DeliberationTrigger.choices
    )
    tool_calls = models.PositiveSmallIntegerField(default=0)
    llm_calls = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # What the calls cost (provider) and what they bill, summed as each call is recorded.
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    billed_usd = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    llm_wait_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # While a deliberative turn runs: {"step": 3, "max_steps": 10} (the widget's "Thinking it
    # through… step 3"); never the reasoning itself.
    progress = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["client", "conversation", "created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(
                        kind=TraceKind.TURN,
                        conversation__isnull=False,
                        user_message__isnull=False,
                        playground_run__isnull=True,
                        case_run__isnull=True,
                    )
                    | models.Q(
                        kind=TraceKind.PLAYGROUND,
                        conversation__isnull=True,
                        user_message__isnull=True,
                        playground_run__isnull=False,
                        case_run__isnull=True,
                    )
                    | models.Q(
                        kind=TraceKind.SIMULATION,
                        conversation__isnull=True,
                        user_message__isnull=True,
                        playground_run__isnull=True,
                        case_run__isnull=False,
                    )
                ),
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

    trace = models.ForeignKey(ReasoningTrace, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=40)
    input_summary = models.TextField(blank=True)
    output = models.JSONField(default=dict, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["trace", "index"]
        constraints = [models.UniqueConstraint(fields=["trace", "index"], name="uniq_step_index")]

    def __str__(self) -> str:
        return f"{self.index}. {self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Append-only: a recorded step is evidence and is never rewritten.
        if not self._state.adding:
            raise RuntimeError("ReasoningStep rows are append-only")
        super().save(*args, **kwargs)
