"""Approvals admin: a read-only audit list of the tool calls held for a teammate's approval.
They are decided in the console (Approvals) or the API (apps/approvals/services.py)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from apps.api.admin import pretty_json_block
from apps.approvals.models import ApprovalRequest
from apps.tools.admin import ToolCallAdmin

APPROVAL_FIELDS: tuple[str, ...] = (
    "client",
    "public_id",
    "conversation_short",
    "trace",
    "tool",
    "params_pretty",
    "rule",
    "basis_pretty",
    "status",
    "withdrawn_at",
    "withdrawn_in",
    "withdrawn_because",
    "pending_action",
    "idempotency_key",
    "requested_in",
    "expires_at",
    "decided_by",
    "decided_at",
    "reason",
    "execution",
    "outcome_message",
    "finished_at",
    "created_at",
    "updated_at",
)


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ToolCallAdmin):
    """Tool calls held for a teammate's approval. Decided in the console (Approvals) or the
    API, where the run and the customer's message happen; the admin keeps the record."""

    list_display = [*ToolCallAdmin.list_display, "decided_by"]
    list_filter = ["status", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = [*ToolCallAdmin.list_select_related, "decided_by"]
    search_fields = ["tool__name", "idempotency_key", "reason"]
    fields = APPROVAL_FIELDS
    readonly_fields = APPROVAL_FIELDS

    @admin.display(description=_("Sums that held it"))
    def basis_pretty(self, obj: ApprovalRequest) -> SafeString | str:
        """Per scope, the sum and the calls it is made of, and `tripped` (the scopes over the
        threshold)."""
        return pretty_json_block(obj.basis) if obj.basis else "-"
