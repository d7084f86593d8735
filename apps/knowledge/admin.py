"""Knowledge admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from apps.core.admin import TenantScopedAdmin
from apps.core.exceptions import ApplicationError
from apps.knowledge.models import KnowledgeSource
from apps.knowledge.services.sync import source_sync_start

# --- importing: "Sync now" and the sync's progress on sources -------------------------------


class SourceSyncAdminMixin:
    """The source admin's import part: the "Sync now" action and the progress columns and
    fields (done of total, the message, the page errors). Refresh the page to follow a sync."""

    sync_list_display = ("status", "sync_progress", "last_synced_at")
    sync_readonly_fields = ("status", "last_synced_at", "error", "sync_progress", "sync_errors")

    @admin.display(description=_("progress"))
    def sync_progress(self, obj: KnowledgeSource) -> str:
        progress = obj.progress or {}
        if not progress:
            return "—"
        counts = gettext("%(done)s / %(total)s pages") % {
            "done": progress.get("done", 0),
            "total": progress.get("total", 0),
        }
        message = progress.get("message") or ""
        return f"{counts} — {message}" if message else counts

    @admin.display(description=_("page errors"))
    def sync_errors(self, obj: KnowledgeSource) -> SafeString | str:
        errors = [e for e in (obj.progress or {}).get("errors") or [] if isinstance(e, dict)]
        if not errors:
            return "—"
        items = format_html_join(
            "", "<li>{}: {}</li>", ((e.get("page", ""), e.get("error", "")) for e in errors)
        )
        return format_html("<ul>{}</ul>", items)

    @admin.action(description=_("Sync now"), permissions=["change"])
    def sync_now(self, request: HttpRequest, queryset: QuerySet[KnowledgeSource]) -> None:
        queued = 0
        for source in queryset.select_related("client"):
            try:
                source_sync_start(source=source, user=request.user)
            except ApplicationError as exc:
                self.message_user(  # type: ignore[attr-defined]
                    request, f"{source.name}: {exc}", messages.ERROR
                )
            else:
                queued += 1
        if queued:
            self.message_user(  # type: ignore[attr-defined]
                request,
                ngettext(
                    "%(count)d source is syncing; refresh the page to see its progress.",
                    "%(count)d sources are syncing; refresh the page to see their progress.",
                    queued,
                )
                % {"count": queued},
                messages.SUCCESS,
            )


# --- sources (a minimal page until the content admin lands; it keeps the mixin above) -------


@admin.register(KnowledgeSource)
class KnowledgeSourceAdmin(SourceSyncAdminMixin, TenantScopedAdmin):
    list_display = ("name", "client", "kind", *SourceSyncAdminMixin.sync_list_display)
    list_filter = ("kind", "status")
    search_fields = ("name", "url")
    fields = (
        "client",
        "name",
        "kind",
        "url",
        "file",
        "language",
        "enabled",
        "resync_hours",
        *SourceSyncAdminMixin.sync_readonly_fields,
    )
    readonly_fields = SourceSyncAdminMixin.sync_readonly_fields
    actions = ["sync_now"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("client")
