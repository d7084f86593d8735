"""Message and conversation shapes shared by the widget and staff APIs (docs/api.md,
docs/widget.md)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.conversations.models import Message
from apps.conversations.rendering import message_html

# The only `data` keys a customer's widget may see on a visible message.
# `options`: a clarifying question's quick replies (deliberative mode).
# `pending_action` and `digest`: what the Yes/No buttons send back to settle exactly their question.
# `sources`: the help-centre articles a knowledge answer came from (`[{"title", "url"}]`).
WIDGET_DATA_KEYS = frozenset(
    {
        "offline",
        "mode",
        "escalation_id",
        "resolved",
        "options",
        "pending_action",
        "digest",
        "sources",
    }
)


class MessageSerializer(serializers.ModelSerializer[Message]):
    """Full message JSON for staff and back-offices: internal messages included. `id` is the
    message's opaque public id (a UUID), never the database's global counter."""

    id = serializers.UUIDField(source="public_id", read_only=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "role",
            "visibility",
            "kind",
            "text",
            "data",
            "language",
            "created_at",
        ]
        read_only_fields = fields


class WidgetMessageSerializer(MessageSerializer):
    """A visible message as the customer's widget gets it: `data` trimmed to what is theirs."""

    # (the metaclass moves declared fields off the class, so this does not shadow `.data`)
    data = serializers.SerializerMethodField()  # type: ignore[assignment]
    html = serializers.SerializerMethodField(
        help_text="An assistant's or staff reply's Markdown as safe HTML (bold, italics, "
        'lists, http/https/mailto links; docs/widget.md, "How replies are shown"); "" for '
        "other messages, whose `text` is shown as it is."
    )

    class Meta(MessageSerializer.Meta):
        fields = [*MessageSerializer.Meta.fields, "html"]
        read_only_fields = fields

    def get_data(self, message: Message) -> dict[str, Any]:
        return {k: v for k, v in (message.data or {}).items() if k in WIDGET_DATA_KEYS}

    @extend_schema_field(serializers.CharField())
    def get_html(self, message: Message) -> str:
        return message_html(message.role, message.text)
