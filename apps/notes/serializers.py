"""Notes in the staff API: what a note looks like, what staff may send, and the list filters."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.api.schema import NamedChoiceField
from apps.api.serializers import RefusesUnknownFields
from apps.notes.maintenance import MAX_CONTENT_CHARS, MAX_LANGUAGE_CHARS, MAX_REF_CHARS
from apps.notes.models import NoteSource, NoteStatus, NoteType

MAX_QUERY_CHARS = 200


class NoteFilterSerializer(serializers.Serializer):
    """Query-string filters of the note list (validated; errors name the parameter)."""

    q = serializers.CharField(
        required=False, max_length=MAX_QUERY_CHARS, help_text="Full-text search in the content."
    )
    type = serializers.ChoiceField(choices=NoteType.choices, required=False)
    status = serializers.ChoiceField(choices=NoteStatus.choices, required=False)
    language = serializers.CharField(required=False, max_length=MAX_LANGUAGE_CHARS)


class NoteSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The note's id within the client.")
    type = NamedChoiceField(choices=NoteType, enum_name="NoteType")
    content = serializers.CharField()
    language = serializers.CharField(help_text="Language code; empty = notes for any language.")
    ref = serializers.CharField(
        help_text="What the note is about: a tool name, an order code, an FAQ key; may be empty."
    )
    confidence = serializers.FloatField(allow_null=True, help_text="0–1; null when unknown.")
    # (a field named `source` shadows Field.source in the type stubs only)
    source = NamedChoiceField(choices=NoteSource, enum_name="NoteSource")  # type: ignore[assignment]
    status = NamedChoiceField(
        choices=NoteStatus,
        enum_name="NoteStatus",
        help_text="Only `active` notes reach the assistant's prompts.",
    )
    hits = serializers.IntegerField(
        help_text="How often the same note was written again within a day (deduplicated)."
    )
    session_id = serializers.CharField(
        help_text="The process run that wrote it (YYYYMMDD_HHMMSS_PID_RANDOM)."
    )
    conversation = serializers.UUIDField(
        source="conversation.public_id",
        allow_null=True,
        help_text="Public id of the conversation it was learnt in; null if none.",
    )
    turn = serializers.IntegerField(
        source="trace_id", allow_null=True, help_text="Id of the turn it was learnt in."
    )
    reviewed_by = serializers.EmailField(
        source="reviewed_by.email", allow_null=True, help_text="Who approved or archived it."
    )
    reviewed_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class NoteWriteSerializer(RefusesUnknownFields):
    """A staff note. `source` is always `staff`; the id, hash and timestamps are the server's."""

    type = NamedChoiceField(choices=NoteType, enum_name="NoteType")
    content = serializers.CharField(max_length=MAX_CONTENT_CHARS)
    language = serializers.CharField(
        max_length=MAX_LANGUAGE_CHARS, required=False, allow_blank=True, default=""
    )
    ref = serializers.CharField(
        max_length=MAX_REF_CHARS, required=False, allow_blank=True, default=""
    )
    confidence = serializers.FloatField(
        min_value=0, max_value=1, required=False, allow_null=True, default=None
    )
    status = NamedChoiceField(
        choices=NoteStatus,
        enum_name="NoteStatus",
        required=False,
        help_text="Create: `active` (the default) or `pending_review`. Update: approve "
        "(`active`) or archive (`archived`).",
    )


class NoteUpdateSerializer(NoteWriteSerializer):
    """Every field optional; only the given ones change."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["partial"] = True
        super().__init__(*args, **kwargs)


class NoteImportResultSerializer(serializers.Serializer):
    created = serializers.IntegerField(help_text="Notes added.")
    skipped = serializers.IntegerField(
        help_text="Lines whose note (type, ref, content) the client already had, or that "
        "repeated an earlier line."
    )
