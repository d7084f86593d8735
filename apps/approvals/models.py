"""A teammate's approval for a high-impact tool call: the request the last gate of a turn holds
the call in (apps/approvals/services.py). The table is the one the tools app created
(`tools_approvalrequest`): the model moved here, its rows did not."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, optional_fk, status_field
from apps.core.models import PublicTenantModel
from apps.tools.models import ClientTool, PendingAction, ToolExecution


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for a teammate")
    APPROVED = "approved", _("Approved")
    DENIED = "denied", _("Denied")
    EXPIRED = "expired", _("Timed out (handed to a person)")
    WITHDRAWN = "withdrawn", _("Withdrawn by the customer")


class WithdrawnBecause(models.TextChoices):
    """Why the customer's message withdrew a waiting request (apps/approvals/withdrawal.py)."""

    NONE = "", _("—")
    DECLINED = "declined", _("The customer said no")
    NEW_MESSAGE = "new_message", _("The customer wrote about something else")


class ApprovalRequest(PublicTenantModel):
    """A tool call the guards let run that the client's rule holds for a teammate's approval:
    this exact tool, these exact params, run (once approved) under this idempotency key."""

    conversation = conversation_fk(related_name="approval_requests")
    tool = models.ForeignKey(
        ClientTool, on_delete=models.PROTECT, related_name="+", verbose_name=_("tool")
    )
    params = models.JSONField(default=dict, verbose_name=_("params"))
    params_hash = models.CharField(max_length=64, verbose_name=_("params hash"))
    rule = models.JSONField(
        default=dict, help_text=_("The tool's approval rule when asked."), verbose_name=_("rule")
    )
    basis = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "Why a threshold rule asked: per scope, the sum and the calls it is made of, and "
            "which scopes went over the threshold."
        ),
        verbose_name=_("basis"),
    )
    pending_action = optional_fk(
        PendingAction,
        _("pending action"),
        related_name="approval_requests",
        help_text=_("The customer's confirmation, for a destructive tool."),
    )
    idempotency_key = models.CharField(
        max_length=80, unique=True, verbose_name=_("idempotency key")
    )
    requested_in = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        related_name="+",
        help_text=_("The customer message whose turn asked for the approval."),
        verbose_name=_("requested in"),
    )
    trace = optional_fk("reasoning.ReasoningTrace", _("trace"))
    status = status_field(ApprovalStatus.PENDING, max_length=10)
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    decided_by = optional_fk("accounts.User", _("decided by"))
    decided_at = models.DateTimeField(null=True, blank=True, verbose_name=_("decided at"))
    reason = models.TextField(
        blank=True,
        help_text=_("Why it was denied (the customer is told)."),
        verbose_name=_("reason"),
    )
    withdrawn_at = models.DateTimeField(null=True, blank=True, verbose_name=_("withdrawn at"))
    withdrawn_in = optional_fk(
        "conversations.Message",
        _("withdrawn in"),
        help_text=_("The customer message that withdrew the request."),
    )
    withdrawn_because = models.CharField(
        max_length=12,
        choices=WithdrawnBecause.choices,
        default=WithdrawnBecause.NONE,
        blank=True,
        verbose_name=_("withdrawn because"),
    )
    execution = optional_fk(ToolExecution, _("execution"))
    outcome_message = optional_fk(
        "conversations.Message",
        _("outcome message"),
        help_text=_("The message that told the customer the result (posted once)."),
    )
    finished_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=_("When the outcome was settled and the customer told: set once."),
        verbose_name=_("finished at"),
    )

    class Meta:
        db_table = "tools_approvalrequest"
        verbose_name_plural = _("approval requests")
        verbose_name = _("approval request")
        indexes = [
            models.Index(fields=["client", "status", "-created_at"]),
            models.Index(fields=["client", "conversation"]),
            models.Index(fields=["status", "expires_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.tool.name}({self.params}) — {self.status}"
