from __future__ import annotations

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TenantOwnedModel


class ToolKind(models.TextChoices):
    READ = "read", _("Read — only retrieves information")
    ACTION = "action", _("Action — changes something, reversible")
    DESTRUCTIVE = "destructive", _("Destructive — cancel, delete, refund; needs confirmation")


class ExecutorType:
    """The executor types GuideDesk ships with. The registry (`apps.tools.executors`, one module
    per type) is the source of truth: the field's choices come from it."""

    WEBHOOK = "webhook"
    BUILTIN = "builtin"


def executor_type_choices() -> list[tuple[str, str]]:
    from apps.tools.executors import executor_choices

    return executor_choices()


class ClientTool(TenantOwnedModel):
    """A tool the assistant may call for one client: its contract (JSON Schema parameters) and
    how it runs. Whatever the model claims, `kind` decides the safety rules."""

    name = models.CharField(max_length=64)
    description = models.TextField()
    kind = models.CharField(max_length=12, choices=ToolKind.choices, default=ToolKind.READ)
    parameters = models.JSONField(default=dict, help_text=_("JSON Schema of the tool's params."))
    executor_type = models.CharField(
        max_length=10, choices=executor_type_choices, default=ExecutorType.WEBHOOK
    )
    webhook_url = models.URLField(max_length=500, blank=True)
    signing_secret = models.CharField(
        max_length=200,
        blank=True,
        help_text=_(
            "Standard Webhooks signing secret (whsec_…, or any secret of 8+ characters). "
            "Write-only: never shown after it is saved."
        ),
    )
    rotation_secret = models.CharField(
        max_length=200,
        blank=True,
        help_text=_(
            "A second active secret during a rotation: every request carries a signature "
            "with each. Write-only."
        ),
    )
    builtin_handler = models.CharField(max_length=100, blank=True)
    timeout_seconds = models.FloatField(default=10.0)
    max_retries = models.PositiveSmallIntegerField(default=2)
    result_template = models.TextField(
        blank=True,
        help_text=_(
            "Optional reply after the tool ran, e.g. 'Order {order_id}: {result[status]}'. "
            "Empty = the assistant composes the reply."
        ),
    )
    display_name = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            'What the customer reads for this tool, per language: {"en": "Cancel order", '
            '"es": "Cancelar pedido"}. Empty = the name, humanised.'
        ),
    )
    labels = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "What the customer reads for each parameter or result field, per language: "
            '{"es": {"order_id": "número de pedido"}}. Missing = the field name, humanised.'
        ),
    )
    enabled = models.BooleanField(default=True)
    customer_scoped = models.BooleanField(
        _("customer scoped"),
        default=False,
        help_text=_(
            "Acts on or reveals one customer's data: runs only in a conversation whose customer "
            "is verified, and its webhook receives that customer's id and e-mail."
        ),
    )
    approval_rule = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "When a call needs a teammate's approval before it runs (after the customer's "
            'confirmation and every guard): empty = never, {"always": true}, or a threshold '
            'such as {"param": "amount", "above": 100}; optional "timeout_minutes".'
        ),
    )

    class Meta:
        verbose_name = _("tool")
        ordering = ["client", "name"]
        constraints = [
            models.UniqueConstraint(fields=["client", "name"], name="uniq_tool_client_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def is_configured(self) -> bool:
        from apps.tools.executors import executor_for

        executor = executor_for(self.executor_type)
        return executor is not None and executor.configured(self)

    @property
    def required_params(self) -> list[str]:
        required = self.parameters.get("required", []) if isinstance(self.parameters, dict) else []
        return [str(r) for r in required]


class PendingActionStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for the customer's confirmation")
    CONFIRMED = "confirmed", _("Confirmed")
    EXECUTED = "executed", _("Executed")
    DECLINED = "declined", _("Declined by the customer")
    EXPIRED = "expired", _("Expired (ignored or timed out)")
    SUPERSEDED = "superseded", _("Superseded by a changed request")


class PendingAction(TenantOwnedModel):
    """A destructive call put to the customer for confirmation: this exact tool, these exact
    params. Only the customer's *next* message can confirm it."""

    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="pending_actions"
    )
    tool = models.ForeignKey(ClientTool, on_delete=models.CASCADE, related_name="+")
    params = models.JSONField(default=dict)
    params_hash = models.CharField(max_length=64)
    status = models.CharField(
        max_length=12, choices=PendingActionStatus.choices, default=PendingActionStatus.PENDING
    )
    proposed_in = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        related_name="+",
        help_text=_("The customer message whose turn proposed the action."),
    )
    question = models.ForeignKey(
        "conversations.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The assistant's confirmation question."),
    )
    resolved_by = models.ForeignKey(
        "conversations.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The customer message that confirmed or declined it."),
    )
    expires_at = models.DateTimeField()
    idempotency_key = models.CharField(max_length=80, unique=True)

    class Meta:
        indexes = [models.Index(fields=["client", "conversation", "status"])]

    def __str__(self) -> str:
        return f"{self.tool.name}({self.params}) — {self.status}"


class ExecutionStatus(models.TextChoices):
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")


class FailureKind(models.TextChoices):
    NONE = "", _("—")
    REFUSED = "refused", _("Refused by the business (message is for the customer)")
    ERROR = "error", _("Integration error")
    UNAVAILABLE = "unavailable", _("Unreachable after retries")
    TIMED_OUT = "timed_out", _("Timed out (the tool's time limit or the turn's deadline)")


class ToolExecution(TenantOwnedModel):
    """One tool run (with its retries). The unique idempotency key makes a second run of the
    same confirmed action impossible, even if a turn is processed twice."""

    conversation = models.ForeignKey(
        "conversations.Conversation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    trace = models.ForeignKey(
        "reasoning.ReasoningTrace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tool_executions",
    )
    tool = models.ForeignKey(ClientTool, on_delete=models.PROTECT, related_name="executions")
    pending_action = models.OneToOneField(
        PendingAction, null=True, blank=True, on_delete=models.SET_NULL, related_name="execution"
    )
    params = models.JSONField(default=dict)
    idempotency_key = models.CharField(max_length=80, unique=True)
    status = models.CharField(
        max_length=10, choices=ExecutionStatus.choices, default=ExecutionStatus.RUNNING
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # What the business's refusal was, as a code the customer is told in their own language
    # (apps/tools/wording.py, ERROR_CODES); '' when it gave none.
    error_code = models.CharField(max_length=64, blank=True)
    failure_kind = models.CharField(
        max_length=12, choices=FailureKind.choices, default=FailureKind.NONE, blank=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["client", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.tool.name} {self.status}"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for a teammate")
    APPROVED = "approved", _("Approved")
    DENIED = "denied", _("Denied")
    EXPIRED = "expired", _("Timed out (handed to a person)")
    WITHDRAWN = "withdrawn", _("Withdrawn by the customer")


class WithdrawnBecause(models.TextChoices):
    """Why the customer's message withdrew a waiting request (apps/reasoning/approvals.py)."""

    NONE = "", _("—")
    DECLINED = "declined", _("The customer said no")
    NEW_MESSAGE = "new_message", _("The customer wrote about something else")


class ApprovalRequest(TenantOwnedModel):
    """A tool call the guards let run that the client's rule holds for a teammate's approval:
    this exact tool, these exact params, run (once approved) under this idempotency key."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, related_name="approval_requests"
    )
    tool = models.ForeignKey(ClientTool, on_delete=models.PROTECT, related_name="+")
    params = models.JSONField(default=dict)
    params_hash = models.CharField(max_length=64)
    rule = models.JSONField(default=dict, help_text=_("The tool's approval rule when asked."))
    basis = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "Why a threshold rule asked: per scope, the sum and the calls it is made of, and "
            "which scopes went over the threshold."
        ),
    )
    pending_action = models.ForeignKey(
        PendingAction,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approval_requests",
        help_text=_("The customer's confirmation, for a destructive tool."),
    )
    idempotency_key = models.CharField(max_length=80, unique=True)
    requested_in = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        related_name="+",
        help_text=_("The customer message whose turn asked for the approval."),
    )
    trace = models.ForeignKey(
        "reasoning.ReasoningTrace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    status = models.CharField(
        max_length=10, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, help_text=_("Why it was denied (the customer is told)."))
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_in = models.ForeignKey(
        "conversations.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The customer message that withdrew the request."),
    )
    withdrawn_because = models.CharField(
        max_length=12, choices=WithdrawnBecause.choices, default=WithdrawnBecause.NONE, blank=True
    )
    execution = models.ForeignKey(
        ToolExecution, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outcome_message = models.ForeignKey(
        "conversations.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The message that told the customer the result (posted once)."),
    )
    finished_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=_("When the outcome was settled and the customer told: set once."),
    )

    class Meta:
        verbose_name = _("approval request")
        indexes = [
            models.Index(fields=["client", "status", "-created_at"]),
            models.Index(fields=["client", "conversation"]),
            models.Index(fields=["status", "expires_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.tool.name}({self.params}) — {self.status}"
