"""Flags admin: a read-only record of staff's flags on the assistant's replies."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ReadOnlyAuditAdmin
from apps.conversations.admin import conversation_column
from apps.flags.models import MessageFlag


@admin.register(MessageFlag)
class MessageFlagAdmin(ReadOnlyAuditAdmin):
    """Staff's flags on the assistant's replies (made in the console or the API), for the
    record; what they teach is reviewed under Insights → proposals."""

    list_display = ["flagged_reply", "reason", "client", "flagged_by", "created_at"]
    list_filter = ["reason", ("client", admin.RelatedOnlyFieldListFilter), "created_at"]
    list_select_related = ["client", "conversation", "message", "flagged_by"]
    search_fields = ["correction", "message__text"]
    ordering = ["-created_at"]
    fields = ("conversation_short", "flagged_reply", "reason", "correction", "flagged_by")
    readonly_fields = fields

    conversation_short = conversation_column()

    @admin.display(description=_("Flagged reply"))
    def flagged_reply(self, obj: MessageFlag) -> str:
        text = " ".join(obj.message.text.split())
        return text if len(text) <= 120 else text[:119] + "…"
