"""Cross-session notes: what the assistant (and staff) learned, fed back into later prompts.

The seed's `session_notes` table, tenant-owned. A note is written by the pipeline after a turn
(source `ai`: SUCCESS / FAILURE outcome records in the system's own words, active at once —
apps/reasoning/turn_notes.py), by the model through the `add_note` tool (source `ai`), by staff
(`staff`) or proposed by the nightly insights job (`insight`). Only `active` notes reach a
prompt; whatever the model or the insights job proposes, of any type, waits in `pending_review`
until a person approves it (apps/notes/services.py, `default_status`).

Labels and help texts are written for the support lead who reviews notes in the admin.
"""

from __future__ import annotations

from typing import Self

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk, status_field
from apps.core.models import TenantOwnedModel, TenantQuerySet


class NoteType(models.TextChoices):
    SUCCESS = "success", _("Success")
    FAILURE = "failure", _("Failure")
    PATTERN = "pattern", _("Pattern")
    STRATEGY = "strategy", _("Strategy")
    TIP = "tip", _("Tip")


class NoteSource(models.TextChoices):
    AI = "ai", _("Assistant")
    STAFF = "staff", _("Staff")
    INSIGHT = "insight", _("Insights report")


class NoteStatus(models.TextChoices):
    ACTIVE = "active", _("In use")
    PENDING_REVIEW = "pending_review", _("Waiting for approval")
    ARCHIVED = "archived", _("Archived")


# The seed's relevance rule: these types are shown whatever the conversation's language.
CROSS_LANGUAGE_TYPES = frozenset({NoteType.STRATEGY, NoteType.PATTERN})


class NoteQuerySet(TenantQuerySet["Note"]):
    def active(self) -> Self:
        return self.filter(status=NoteStatus.ACTIVE)


class Note(TenantOwnedModel):
    language = models.CharField(
        _("language"),
        max_length=16,
        blank=True,
        default="",
        help_text=_(
            "The conversations this note is for, by language (en, de, …). Empty: conversations "
            "in every language."
        ),
    )
    type = models.CharField(_("type"), max_length=16, choices=NoteType.choices)
    content = models.TextField(
        _("note"),
        help_text=_(
            "What was learned, in a sentence or two. The assistant reads it in later "
            "conversations as an observation, never as an instruction; links, e-mail "
            "addresses, phone numbers and order or payment numbers are masked when it does."
        ),
    )
    ref = models.CharField(
        max_length=200,
        blank=True,
        default="",
        verbose_name=_("about"),
        help_text=_(
            "What the note is about: a tool's name or a topic. No customer's order number."
        ),
    )
    confidence = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        verbose_name=_("confidence"),
        help_text=_("How sure the writer was, from 0 (a guess) to 1 (certain). Optional."),
    )
    session_id = models.CharField(
        max_length=64,
        verbose_name=_("written during"),
        help_text=_(
            "Which start of the assistant's service wrote the note (its date and time). Notes "
            "of one start can be found and removed together."
        ),
    )
    conversation = optional_fk("conversations.Conversation", _("conversation"))
    trace = optional_fk("reasoning.ReasoningTrace", _("trace"))
    source = models.CharField(max_length=16, choices=NoteSource.choices, verbose_name=_("source"))
    status = status_field(NoteStatus.ACTIVE, max_length=16, db_index=True)
    hits = models.PositiveIntegerField(
        _("times written"),
        default=1,
        help_text=_(
            "How many times the same note was written within a day; repeats are counted here "
            "instead of being added again."
        ),
    )
    content_hash = models.CharField(
        _("fingerprint"),
        max_length=64,
        editable=False,
        help_text=_("Recognises the same note when it is written again (type, subject and text)."),
    )
    reviewed_by = optional_fk(settings.AUTH_USER_MODEL, _("reviewed by"))
    reviewed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("reviewed at"))
    rejected = models.BooleanField(
        default=False,
        verbose_name=_("rejected"),
        help_text=_(
            "Turned down by a reviewer (not merely archived): the same proposal is not put up "
            "for approval again."
        ),
    )
    # Full-text search on PostgreSQL: filled by the services (the note language's text-search
    # configuration plus 'simple'), GIN-indexed by migration 0001 on PostgreSQL only.
    search_vector = SearchVectorField(null=True, blank=True, editable=False)

    objects = NoteQuerySet.as_manager()  # type: ignore[misc]

    class Meta:
        verbose_name = _("note")
        verbose_name_plural = _("notes")
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
