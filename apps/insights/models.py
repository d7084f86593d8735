"""Insights: what went wrong, grouped by topic, proposed as FAQ entries, missing articles or
notes for staff to approve (docs/architecture.md, "Insights"; docs/knowledge.md, "Knowledge
gaps").

`InsightProposal` is the one review item of every kind, so the admin lists, shows the evidence of
and approves them the same way: an FAQ proposal carries its question and draft answer (approved,
it becomes an FAQ article); a missing-article proposal carries the customers' questions and a
drafted outline, and once staff draft it, the DRAFT `Article` that approval publishes; a note
proposal carries its type and content and, once created, the `Note` row (source `insight`,
status `pending_review`) it activates on approval. `InsightRun` records each run (nightly, or
"Run insights now" from the admin): its window, its progress, what it read, what it spent and how
it ended."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk, status_field
from apps.core.models import PublicTenantModel, TenantOwnedModel


class ProposalKind(models.TextChoices):
    FAQ = "faq", _("FAQ entry")
    NOTE = "note", _("Note")
    ARTICLE = "article", _("Missing article")


class ProposalStatus(models.TextChoices):
    PENDING_REVIEW = "pending_review", _("Pending review")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")


class ProposalOrigin(models.TextChoices):
    RUN = "run", _("Insights run")
    FLAG = "flag", _("Flagged answer")
    STAFF_REPLY = "staff_reply", _("Staff reply")


class RunStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")


class InsightRun(TenantOwnedModel):
    """One run of the insights job for one client and window. Unique per (client, window): a
    run that finished is not repeated, a failed one is retried by the next attempt."""

    window_start = models.DateTimeField(verbose_name=_("window start"))
    window_end = models.DateTimeField(verbose_name=_("window end"))
    status = status_field(RunStatus.RUNNING, max_length=10)
    started_at = models.DateTimeField(null=True, blank=True, verbose_name=_("started at"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))
    # What was read: {"escalation": n, "low_confidence": n, "questioned": n, "failure_note": n}
    found = models.JSONField(default=dict, blank=True, verbose_name=_("found"))
    items_sent = models.PositiveIntegerField(
        default=0, help_text=_("Items in the model's prompt."), verbose_name=_("items sent")
    )
    items_left_out = models.PositiveIntegerField(
        default=0,
        help_text=_("Items that did not fit the token bound (INSIGHTS_MAX_INPUT_TOKENS)."),
        verbose_name=_("items left out"),
    )
    topics = models.PositiveIntegerField(default=0, verbose_name=_("topics"))
    proposals_created = models.PositiveIntegerField(default=0, verbose_name=_("proposals created"))
    proposals_updated = models.PositiveIntegerField(default=0, verbose_name=_("proposals updated"))
    ids_dropped = models.PositiveIntegerField(
        default=0,
        help_text=_("Conversation ids the model returned that it was not given."),
        verbose_name=_("ids dropped"),
    )
    llm_calls = models.PositiveSmallIntegerField(default=0, verbose_name=_("llm calls"))
    prompt_tokens = models.PositiveIntegerField(default=0, verbose_name=_("prompt tokens"))
    completion_tokens = models.PositiveIntegerField(default=0, verbose_name=_("completion tokens"))
    model = models.CharField(max_length=100, blank=True, verbose_name=_("model"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    # "Run insights now" (staff asked, window up to the moment they asked) vs the nightly job.
    on_demand = models.BooleanField(default=False, verbose_name=_("on demand"))
    requested_by = optional_fk(settings.AUTH_USER_MODEL, _("requested by"))
    # Progress: steps done of RUN_STEPS (read the evidence, ask the model, store proposals).
    steps_done = models.PositiveSmallIntegerField(default=0, verbose_name=_("steps done"))

    class Meta:
        verbose_name = _("insight run")
        verbose_name_plural = _("insight runs")
        ordering = ["-window_end", "-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "window_start", "window_end"], name="uniq_insight_run_window"
            )
        ]

    def __str__(self) -> str:
        return f"Insights {self.window_start:%Y-%m-%d}–{self.window_end:%Y-%m-%d} ({self.status})"


class InsightProposal(PublicTenantModel):
    run = optional_fk(InsightRun, _("run"), related_name="proposals")
    kind = models.CharField(max_length=10, choices=ProposalKind.choices, verbose_name=_("kind"))
    status = status_field(ProposalStatus.PENDING_REVIEW, max_length=16)
    # Where it came from: the nightly run, a staff member's flag with a correction, or a staff
    # reply they chose to teach from (apps/insights/teach.py).
    origin = models.CharField(
        max_length=12,
        choices=ProposalOrigin.choices,
        default=ProposalOrigin.RUN,
        verbose_name=_("origin"),
    )
    flag = optional_fk(
        "flags.MessageFlag", _("flag"), help_text=_("Flagged answers: the flag it was made from.")
    )
    source_message = optional_fk(
        "conversations.Message",
        _("source message"),
        help_text=_("Staff replies: the reply it was made from."),
    )
    title = models.CharField(max_length=200, help_text=_("The topic."), verbose_name=_("title"))
    topic_key = models.CharField(max_length=200, editable=False, verbose_name=_("topic key"))
    count = models.PositiveIntegerField(
        default=0,
        help_text=_("Conversations about this topic (counted from the data, not the model)."),
        verbose_name=_("count"),
    )
    conversation_ids = models.JSONField(
        default=list,
        blank=True,
        help_text=_("Public ids of the conversations about this topic."),
        verbose_name=_("conversation ids"),
    )
    question = models.TextField(blank=True, verbose_name=_("question"))
    answer = models.TextField(
        blank=True,
        help_text=_("Draft answer: check it before approving."),
        verbose_name=_("answer"),
    )
    note_type = models.CharField(max_length=10, blank=True, verbose_name=_("note type"))
    content = models.TextField(blank=True, verbose_name=_("content"))
    questions = models.JSONField(
        default=list,
        blank=True,
        help_text=_("Missing articles: the customers' questions, in their words (from the data)."),
        verbose_name=_("questions"),
    )
    outline = models.TextField(
        blank=True,
        help_text=_("Missing articles: a drafted outline (Markdown) to write from."),
        verbose_name=_("outline"),
    )
    article = optional_fk(
        "knowledge.Article",
        _("article"),
        help_text=_(
            "Missing articles: the draft article staff made from it (published on approval)."
        ),
    )
    note = optional_fk(
        "notes.Note",
        _("note"),
        help_text=_("Note proposals: the note (source insight) approval activates."),
    )
    reviewed_by = optional_fk(settings.AUTH_USER_MODEL, _("reviewed by"))
    reviewed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("reviewed at"))
    review_comment = models.TextField(blank=True, verbose_name=_("review comment"))

    class Meta:
        verbose_name = _("insight proposal")
        verbose_name_plural = _("insight proposals")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["client", "status", "-created_at"])]
        constraints = [
            # One open proposal per topic: a later run adds its evidence to it.
            models.UniqueConstraint(
                fields=["client", "kind", "topic_key"],
                condition=models.Q(status="pending_review"),
                name="uniq_pending_insight_topic",
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.title}"
