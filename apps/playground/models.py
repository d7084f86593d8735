"""A playground run: one reasoning turn run outside any conversation — by staff in the console's
playground or by `manage.py reason` — so nothing is sent to a customer and no tool runs.

The run keeps what is about the run — who started it, the question and settings, its status,
the stop flag, its progress and its final result. Its journal is a `ReasoningTrace` of kind
`playground` (`run.trace`, created with the run): the steps, LLM calls, tokens, cost and timings,
recorded exactly as a conversation turn's. Usage is recorded with purpose `playground`."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk, status_field
from apps.core.models import PublicTenantModel


class RunStatus(models.TextChoices):
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    STOPPED = "stopped", _("Stopped by staff")
    FAILED = "failed", _("Failed")


class RunSource(models.TextChoices):
    CONSOLE = "console", _("Console playground")
    CLI = "cli", _("manage.py reason")


class PlaygroundRun(PublicTenantModel):
    created_by = optional_fk(settings.AUTH_USER_MODEL, _("created by"))
    source = models.CharField(
        max_length=10,
        choices=RunSource.choices,
        default=RunSource.CONSOLE,
        verbose_name=_("source"),
    )
    mode = models.CharField(max_length=20, verbose_name=_("mode"))
    rubric = models.CharField(
        max_length=100,
        blank=True,
        help_text=_("The rubric chosen for a deliberative run."),
        verbose_name=_("rubric"),
    )
    iterations = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text=_("Refinement iterations (empty: the plan's setting)."),
        verbose_name=_("iterations"),
    )
    question = models.TextField(verbose_name=_("question"))
    # Optional: the run reads this conversation's recent messages as its history (read only).
    conversation = optional_fk("conversations.Conversation", _("conversation"))
    status = status_field(RunStatus.RUNNING, max_length=10)
    stop_requested = models.BooleanField(default=False, verbose_name=_("stop requested"))
    offline = models.BooleanField(default=False, verbose_name=_("offline"))
    progress_step = models.PositiveSmallIntegerField(default=0, verbose_name=_("progress step"))
    progress_max = models.PositiveSmallIntegerField(default=0, verbose_name=_("progress max"))
    # What the customer would have been sent: {"replies": [{text, kind, data}], "escalate":
    # [reason, detail] | null, "confidence": int | null}.
    final = models.JSONField(default=dict, blank=True, verbose_name=_("final"))
    notes = models.JSONField(
        default=list, blank=True, verbose_name=_("notes")
    )  # the internal notes a turn would post
    error = models.TextField(blank=True, verbose_name=_("error"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))

    class Meta:
        verbose_name = _("playground run")
        verbose_name_plural = _("playground runs")
        indexes = [models.Index(fields=["client", "-created_at"], name="playground_client_recent")]

    def __str__(self) -> str:
        return f"Playground run {self.public_id} ({self.mode}, {self.status})"

    @property
    def finished(self) -> bool:
        return self.status != RunStatus.RUNNING
