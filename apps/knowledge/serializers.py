"""Knowledge in the staff API."""

from __future__ import annotations

from rest_framework import serializers

from apps.core.schema import NamedChoiceField
from apps.knowledge.models import SourceKind, SourceStatus

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
    kind = NamedChoiceField(choices=SourceKind, enum_name="KnowledgeSourceKind")
    status = NamedChoiceField(choices=SourceStatus, enum_name="KnowledgeSourceStatus")
    last_synced_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(help_text="Why the last sync failed or stopped early.")
    progress = SourceProgressSerializer()
