"""Knowledge in the staff API: articles, FAQs (an FAQ is an article whose title is the question
and body the answer) and sources; what staff may send, and the list filters. Content rules
(lengths, tags, a source's address or file) are the services' (`apps.knowledge.services.
articles`); these check the shape and refuse fields the server owns."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.api.schema import NamedChoiceField
from apps.api.serializers import RefusesUnknownFields
from apps.knowledge import sources
from apps.knowledge.models import ArticleKind, ArticleStatus, SourceStatus
from apps.knowledge.services.articles import (
    MAX_BODY_CHARS,
    MAX_FAQ_ANSWER_CHARS,
    MAX_LANGUAGE_CHARS,
    MAX_TITLE_CHARS,
)

MAX_QUERY_CHARS = 200


class SourceKindField(NamedChoiceField):
    """A source's kind: one of the registered kinds (apps/knowledge/sources/), read when the
    serializer is made, so a kind module added later is accepted and documented."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=sources.choices(), enum_name="SourceKind", **kwargs)


# ----------------------------------------------------------------------------------- filters


class ArticleFilterSerializer(serializers.Serializer):
    q = serializers.CharField(
        required=False, max_length=MAX_QUERY_CHARS, help_text="Words in the title or text."
    )
    kind = serializers.ChoiceField(choices=ArticleKind.choices, required=False)
    status = serializers.ChoiceField(choices=ArticleStatus.choices, required=False)
    enabled = serializers.BooleanField(required=False, allow_null=True, default=None)
    language = serializers.CharField(required=False, max_length=MAX_LANGUAGE_CHARS)
    tag = serializers.CharField(required=False, max_length=50)
    source = serializers.UUIDField(  # type: ignore[assignment]
        required=False, help_text="Only this source's articles."
    )


class FaqFilterSerializer(serializers.Serializer):
    q = serializers.CharField(required=False, max_length=MAX_QUERY_CHARS)
    status = serializers.ChoiceField(choices=ArticleStatus.choices, required=False)
    enabled = serializers.BooleanField(required=False, allow_null=True, default=None)
    language = serializers.CharField(required=False, max_length=MAX_LANGUAGE_CHARS)


# ---------------------------------------------------------------------------------- articles


class ArticleSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The article's public id.")
    kind = NamedChoiceField(choices=ArticleKind, enum_name="ArticleKind")
    title = serializers.CharField(help_text="For an FAQ: the question.")
    body = serializers.CharField(help_text="Markdown. For an FAQ: the answer.")
    language = serializers.CharField(help_text="en, de, …; empty = the client's language.")
    tags = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField(help_text="Off: the assistant never sees it.")
    status = NamedChoiceField(
        choices=ArticleStatus,
        enum_name="ArticleStatus",
        help_text="Only `published` (and enabled) articles reach the assistant.",
    )
    # (a field named `source` shadows Field.source in the type stubs only)
    source = serializers.UUIDField(  # type: ignore[assignment]
        source="source.public_id", allow_null=True, help_text="The source's public id, or null."
    )
    source_url = serializers.CharField(help_text="The page it was imported from, if any.")
    approved_by = serializers.EmailField(source="approved_by.email", allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ArticleWriteSerializer(RefusesUnknownFields):
    kind = NamedChoiceField(choices=ArticleKind, enum_name="ArticleKind", required=False)
    title = serializers.CharField(max_length=MAX_TITLE_CHARS)
    body = serializers.CharField(max_length=MAX_BODY_CHARS)
    language = serializers.CharField(
        max_length=MAX_LANGUAGE_CHARS, required=False, allow_blank=True
    )
    tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False)
    enabled = serializers.BooleanField(required=False)
    status = NamedChoiceField(
        choices=ArticleStatus,
        enum_name="ArticleStatus",
        required=False,
        help_text="`draft` keeps it from the assistant until someone publishes it.",
    )
    source = serializers.UUIDField(  # type: ignore[assignment]
        required=False, allow_null=True, help_text="A source of the client, or null."
    )


class FaqSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The FAQ's public id.")
    question = serializers.CharField(source="title")
    answer = serializers.CharField(source="body", help_text="Markdown.")
    language = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()
    status = NamedChoiceField(choices=ArticleStatus, enum_name="ArticleStatus")
    approved_by = serializers.EmailField(source="approved_by.email", allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class FaqWriteSerializer(RefusesUnknownFields):
    question = serializers.CharField(max_length=MAX_TITLE_CHARS)
    answer = serializers.CharField(max_length=MAX_FAQ_ANSWER_CHARS)
    language = serializers.CharField(
        max_length=MAX_LANGUAGE_CHARS, required=False, allow_blank=True
    )
    tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False)
    enabled = serializers.BooleanField(required=False)
    status = NamedChoiceField(choices=ArticleStatus, enum_name="ArticleStatus", required=False)

    def article_data(self) -> dict[str, Any]:
        """The validated FAQ as article fields."""
        data = dict(self.validated_data)
        renamed = {"question": "title", "answer": "body"}
        return {renamed.get(str(name), str(name)): value for name, value in data.items()}


# ----------------------------------------------------------------------------------- sources


# --- importing: a source's sync status and progress ----------------------------------------
# The source representation of the content API carries these fields too (SOURCE_SYNC_FIELDS).


class SourceSyncErrorSerializer(serializers.Serializer):
    page = serializers.CharField(help_text="The page's address (or the file's name).")
    error = serializers.CharField()


class SourceProgressSerializer(serializers.Serializer):
    """What the running (or last) sync reported: pages done of total, bytes read, and how many
    articles were created, updated, left unchanged, failed or switched off."""

    done = serializers.IntegerField(default=0)
    total = serializers.IntegerField(default=0)
    bytes = serializers.IntegerField(default=0, help_text="Bytes fetched so far.")
    created = serializers.IntegerField(default=0)
    updated = serializers.IntegerField(default=0)
    unchanged = serializers.IntegerField(default=0)
    failed = serializers.IntegerField(default=0)
    switched_off = serializers.IntegerField(
        default=0, help_text="Articles switched off because their page left the sitemap."
    )
    message = serializers.CharField(default="")
    # DRF's metaclass takes declared fields off the class: this does not hide `.errors`.
    errors = SourceSyncErrorSerializer(  # type: ignore[assignment]
        many=True, default=list, help_text="The first page errors (at most 20)."
    )


SOURCE_SYNC_FIELDS = ("status", "last_synced_at", "error", "progress")


class SourceSyncSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The source's public id.")
    name = serializers.CharField()
    kind = SourceKindField()
    status = NamedChoiceField(choices=SourceStatus, enum_name="SourceStatus")
    last_synced_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(help_text="Why the last sync failed or stopped early.")
    progress = SourceProgressSerializer()


class SourceSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The source's public id.")
    name = serializers.CharField()
    kind = SourceKindField()
    url = serializers.CharField(help_text="The page or sitemap address (url and sitemap kinds).")
    file = serializers.SerializerMethodField(help_text="The uploaded file's name (file kind).")
    language = serializers.CharField()
    enabled = serializers.BooleanField(help_text="Off: none of its articles reach the assistant.")
    resync_hours = serializers.IntegerField(help_text="0 = only when asked.")
    status = NamedChoiceField(choices=SourceStatus, enum_name="SourceStatus")
    last_synced_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(help_text="Why the last sync failed; empty when it did not.")
    progress = SourceProgressSerializer(help_text="What the sync reported as it went.")
    articles = serializers.IntegerField(
        source="article_count", default=0, help_text="Articles it brought in."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_file(self, obj: Any) -> str:
        return obj.file.name.rsplit("/", 1)[-1] if obj.file else ""


class SourceWriteSerializer(RefusesUnknownFields):
    name = serializers.CharField(max_length=200)
    kind = SourceKindField()
    url = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    file = serializers.FileField(
        required=False,
        help_text="multipart/form-data only: a .md, .markdown, .html, .htm, .pdf or .txt file.",
    )
    language = serializers.CharField(
        max_length=MAX_LANGUAGE_CHARS, required=False, allow_blank=True
    )
    enabled = serializers.BooleanField(required=False)
    resync_hours = serializers.IntegerField(required=False)
