"""Escalation queue: read-only, with one action that hands conversations back to the AI."""

from __future__ import annotations

from typing import cast

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import User
from apps.api.admin import ActionOnlyAdmin, TenantScopedAdmin
from apps.conversations.admin import conversation_column
from apps.core.exceptions import ApplicationError
from apps.escalations.models import Escalation, EscalationStatus, ReplyTemplate

ESCALATION_FIELDS: tuple[str, ...] = (
    "conversation_short",
    "client",
    "reason",
    "detail",
    "status",
    "trace",
    "assigned_to",
    "created_at",
    "notified_at",
    "resolved_at",
    "resolved_by",
)


@admin.register(Escalation)
class EscalationAdmin(ActionOnlyAdmin):
    list_display = [
        "conversation_short",
        "client",
        "reason",
        "status",
        "created_at",
        "assigned_to",
        "resolved_at",
    ]
    list_filter = [
        "status",
        "reason",
        ("client", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    list_select_related = ["client", "conversation", "assigned_to"]
    search_fields = ["detail", "conversation__visitor_id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    actions = ["resolve_and_hand_back"]
    fields = ESCALATION_FIELDS
    readonly_fields = ESCALATION_FIELDS

    conversation_short = conversation_column(sortable=True)

    @admin.action(description=_("Resolve and hand back to the AI"), permissions=["support"])
    def resolve_and_hand_back(self, request: HttpRequest, queryset: QuerySet[Escalation]) -> None:
        # Imported here: the reasoning layer imports the escalation models this admin registers.
        from apps.reasoning.handback import escalation_hand_back

        actor = cast(User, request.user)
        resolved = 0
        already = 0
        failures: list[str] = []
        for escalation in queryset.select_related("client", "conversation"):
            if escalation.status != EscalationStatus.OPEN:
                already += 1
                continue
            try:
                escalation_hand_back(client=escalation.client, escalation=escalation, actor=actor)
            except ApplicationError as exc:
                failures.append(f"{escalation.conversation.public_id}: {exc.message}")
            else:
                resolved += 1
        if resolved:
            self.message_user(
                request,
                _("Resolved %(count)d escalation(s); the AI answers those conversations again.")
                % {"count": resolved},
                messages.SUCCESS,
            )
        if already:
            self.message_user(
                request,
                _("%(count)d escalation(s) were already resolved.") % {"count": already},
                messages.INFO,
            )
        for failure in failures:
            self.message_user(
                request, _("Could not resolve %(failure)s") % {"failure": failure}, messages.ERROR
            )


@admin.register(ReplyTemplate)
class ReplyTemplateAdmin(TenantScopedAdmin):
    """Client admins write their team's reply templates; agents and viewers read them (and use
    them in the console). The body's variables are checked on save (the model's validator)."""

    list_display = ["name", "shortcut", "client", "updated_at"]
    list_filter = [("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client"]
    search_fields = ["name", "shortcut", "body"]
    ordering = ["client", "name"]
    fields = ["client", "name", "shortcut", "body"]
