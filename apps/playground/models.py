"""A playground run: one reasoning turn run outside any conversation — by staff in the console's
playground or by `manage.py reason` — so nothing is sent to a customer and no tool runs.

The run stands in for a turn's `ReasoningTrace` (it carries the same counters the modes update)
and its `PlaygroundStep`s for the trace's `ReasoningStep`s: ordered, append-only events, one per
LLM call, guard decision, context fetch, reasoning step… Usage is recorded with purpose
`playground` (no conversation, no trace)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models

from apps.core.models import TenantOwnedModel


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    STOPPED = "stopped", "Stopped by staff"
    FAILED = "failed", "Failed"


class RunSource(models.TextChoices):
    CONSOLE = "console", "Console playground"
    CLI = "cli", "manage.py reason"


class PlaygroundRun(TenantOwnedModel):
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    source = models.CharField(max_length=10, choices=RunSource.choices, default=RunSource.CONSOLE)
    mode = models.CharField(max_length=20)
    rubric = models.CharField(
        max_length=100, blank=True, help_text="The rubric chosen for a deliberative run."
    )
    iterations = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Refinement iterations (empty: the plan's setting)."
    )
    question = models.TextField()
    # Optional: the run reads this conversation's recent messages as its history (read only).
    conversation = models.ForeignKey(
        "conversations.Conversation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    stop_requested = models.BooleanField(default=False)
    model = models.CharField(max_length=100, blank=True)
    offline = models.BooleanField(default=False)
    progress_step = models.PositiveSmallIntegerField(default=0)
    progress_max = models.PositiveSmallIntegerField(default=0)
    # What the customer would have been sent: {"replies": [{text, kind, data}], "escalate":
    # [reason, detail] | null, "confidence": int | null}.
    final = models.JSONField(default=dict, blank=True)
    notes = models.JSONField(default=list, blank=True)  # the internal notes a turn would post
    error = models.TextField(blank=True)
    # The counters a turn keeps on its trace (the modes update them the same way).
    critique_triggered = models.BooleanField(default=False)
    critique_reasons = models.JSONField(default=list, blank=True)
    context_fetched = models.JSONField(default=list, blank=True)
    escalated = models.BooleanField(default=False)
    tool_calls = models.PositiveSmallIntegerField(default=0)
    llm_calls = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    billed_usd = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    llm_wait_ms = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["client", "-created_at"], name="playground_client_recent")]

    def __str__(self) -> str:
        return f"Playground run {self.public_id} ({self.mode}, {self.status})"

    @property
    def finished(self) -> bool:
        return self.status != RunStatus.RUNNING


class PlaygroundStep(TenantOwnedModel):
    """An append-only event of a run, in order (the run's `ReasoningStep`)."""

    run = models.ForeignKey(PlaygroundRun, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=40)
    input_summary = models.TextField(blank=True)
    output = models.JSONField(default=dict, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="uniq_playground_step_index")
        ]

    def __str__(self) -> str:
        return f"{self.index}. {self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise RuntimeError("PlaygroundStep rows are append-only")
        super().save(*args, **kwargs)
