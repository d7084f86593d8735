"""Cross-session notes: what the assistant (and staff) learned, fed back into later prompts.

The seed's `session_notes` table, tenant-owned. A note is written by the pipeline after a turn
(source `ai`: SUCCESS / FAILURE), by the model through the `add_note` tool (source `ai`), by
staff (`staff`) or proposed by the nightly insights job (`insight`). Only `active` notes reach a
prompt; what the AI proposes as a PATTERN, STRATEGY or TIP waits in `pending_review` until a
person approves it.
"""

from __future__ import annotations

from typing import Self

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.core.models import TenantOwnedModel, TenantQuerySet


class NoteType(models.TextChoices):
    SUCCESS = "success", "Success"
    FAILURE = "failure", "Failure"
    PATTERN = "pattern", "Pattern"
    STRATEGY = "strategy", "Strategy"
    TIP = "tip", "Tip"


class NoteSource(models.TextChoices):
    AI = "ai", "AI"
    STAFF = "staff", "Staff"
    INSIGHT = "insight", "Insight"


class NoteStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    PENDING_REVIEW = "pending_review", "Pending review"
    ARCHIVED = "archived", "Archived"


# Types an AI may only propose: they start pending_review and need a person's approval.
GATED_AI_TYPES = frozenset({NoteType.PATTERN, NoteType.STRATEGY, NoteType.TIP})
# The seed's relevance rule: these types are shown whatever the conversation's language.
CROSS_LANGUAGE_TYPES = frozenset({NoteType.STRATEGY, NoteType.PATTERN})


class NoteQuerySet(TenantQuerySet["Note"]):
    def active(self) -> Self:
        return self.filter(status=NoteStatus.ACTIVE)


class Note(TenantOwnedModel):
    language = models.CharField(
        max_length=16, blank=True, default="", help_text="Language code; empty = any language."
    )
    type = models.CharField(max_length=16, choices=NoteType.choices)
    content = models.TextField()
    ref = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="What the note is about: a tool name, an order code, an FAQ key.",
    )
    confidence = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="0–1, optional.",
    )
    session_id = models.CharField(
        max_length=64,
        help_text="The process run that wrote the note (YYYYMMDD_HHMMSS_PID_RANDOM).",
    )
    conversation = models.ForeignKey(
        "conversations.Conversation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    trace = models.ForeignKey(
        "reasoning.ReasoningTrace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    source = models.CharField(max_length=16, choices=NoteSource.choices)
    status = models.CharField(
        max_length=16, choices=NoteStatus.choices, default=NoteStatus.ACTIVE, db_index=True
    )
    hits = models.PositiveIntegerField(
        default=1, help_text="How often the same note was written within a day (deduplicated)."
    )
    content_hash = models.CharField(
        max_length=64, editable=False, help_text="sha256 of the normalised type|ref|content."
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    rejected = models.BooleanField(
        default=False,
        help_text="Archived by a reviewer's rejection (not merely retired): the same proposal "
        "is not put up for review again.",
    )
    # Full-text search on PostgreSQL: filled by the services (the note language's text-search
    # configuration plus 'simple'), GIN-indexed by migration 0001 on PostgreSQL only.
    search_vector = SearchVectorField(null=True, blank=True, editable=False)

    objects = NoteQuerySet.as_manager()  # type: ignore[misc]

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["client", "language"], name="notes_client_language"),
            models.Index(fields=["client", "type"], name="notes_client_type"),
            models.Index(fields=["client", "created_at"], name="notes_client_created"),
            models.Index(fields=["client", "session_id"], name="notes_client_session"),
            models.Index(fields=["client", "content_hash"], name="notes_client_hash"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(confidence__isnull=True)
                | models.Q(confidence__gte=0.0, confidence__lte=1.0),
                name="notes_confidence_0_1",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_type_display()}: {self.content[:60]}"
