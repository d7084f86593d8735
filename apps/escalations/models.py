from __future__ import annotations

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TenantOwnedModel


class EscalationReason(models.TextChoices):
    CUSTOMER_REQUEST = "customer_request", _("Customer asked for a human")
    LOW_CONFIDENCE = "low_confidence", _("Assistant not confident")
    POLICY = "policy", _("Policy / safety decision")
    TOOL_FAILURE = "tool_failure", _("Tool failed")
    LLM_FAILURE = "llm_failure", _("LLM unavailable or invalid")
    USAGE_LIMIT = "usage_limit", _("Usage limit reached")
    STAFF_TAKEOVER = "staff_takeover", _("Staff took over")
    DEADLINE = "deadline", _("Turn ran out of time")
    SYSTEM_FAILURE = "system_failure", _("Turn could not run (database or worker failure)")
    APPROVAL_TIMEOUT = "approval_timeout", _("No teammate approved the action in time")


class EscalationStatus(models.TextChoices):
    OPEN = "open", _("Open — a human owns the conversation")
    RESOLVED = "resolved", _("Resolved — handed back to the AI")


class Escalation(TenantOwnedModel):
    # The id the APIs and the customer's widget see: opaque, never a count of every tenant's
    # escalations.
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="escalations"
    )
    reason = models.CharField(max_length=20, choices=EscalationReason.choices)
    detail = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=EscalationStatus.choices, default=EscalationStatus.OPEN
    )
    trace = models.ForeignKey(
        "reasoning.ReasoningTrace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    assigned_to = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    notified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["client", "status", "-created_at"])]
        constraints = [
            # At most one open escalation per conversation.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status="open"),
                name="uniq_open_escalation_per_conversation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_reason_display()} ({self.status})"
