from __future__ import annotations

from django.db import models
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, optional_fk, status_field
from apps.core.models import TenantOwnedModel
from apps.tools import preconditions


class ToolKind(models.TextChoices):
    READ = "read", _("Read — only retrieves information")
    ACTION = "action", _("Action — changes something, reversible")
    DESTRUCTIVE = "destructive", _("Destructive — cancel, delete, refund; needs confirmation")


class ExecutorType:
    """The executor types GuideDesk ships with. The registry (`apps.tools.executors`, one module
    per type) is the source of truth: the field's choices come from it."""

    WEBHOOK = "webhook"
    BUILTIN = "builtin"
    MCP = "mcp"


class McpAuth(models.TextChoices):
    NONE = "none", _("No authentication")
    BEARER = "bearer", _("Bearer token")
    OAUTH = "oauth", _("OAuth client credentials")


class McpServer(TenantOwnedModel):
    """An MCP server of the client's (streamable HTTP): its tools become GuideDesk tools,
    each disabled until staff review it (apps/tools/mcp.py, docs/mcp.md)."""

    name = models.CharField(
        _("name"),
        max_length=20,
        help_text=_(
            "A short name, letters, digits and underscores: the start of its tools' names "
            "(crm_get_order)."
        ),
    )
    url = models.URLField(
        _("URL"), max_length=500, help_text=_("The server's streamable HTTP endpoint (https).")
    )
    auth = models.CharField(
        _("authentication"), max_length=10, choices=McpAuth.choices, default=McpAuth.BEARER
    )
    bearer_token = models.CharField(
        _("bearer token"),
        max_length=2000,
        blank=True,
        help_text=_("Sent as Authorization: Bearer …. Write-only: never shown after saving."),
    )
    oauth_token_url = models.URLField(_("OAuth token URL"), max_length=500, blank=True)
    oauth_client_id = models.CharField(_("OAuth client id"), max_length=200, blank=True)
    oauth_client_secret = models.CharField(
        _("OAuth client secret"), max_length=500, blank=True, help_text=_("Write-only.")
    )
    oauth_scope = models.CharField(_("OAuth scope"), max_length=500, blank=True)
    timeout_seconds = models.FloatField(
        _("timeout seconds"),
        default=10.0,
        help_text=_("Each listing or call ends within this time (at most 60 seconds)."),
    )
    customer_argument = models.CharField(
        _("customer argument"),
        max_length=64,
        blank=True,
        help_text=_(
            "For customer-scoped tools: the argument the server declares for the verified "
            "customer's id. GuideDesk fills it in; the assistant never chooses it."
        ),
    )
    customer_header = models.CharField(
        _("customer header"),
        max_length=64,
        blank=True,
        help_text=_("Or the HTTP header that carries the verified customer's id."),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    last_synced_at = models.DateTimeField(_("last listed at"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)

    class Meta:
        verbose_name = _("MCP server")
        verbose_name_plural = _("MCP servers")
        ordering = ["client", "name"]
        constraints = [
            models.UniqueConstraint(fields=["client", "name"], name="uniq_mcp_server_client_name")
        ]

    def __str__(self) -> str:
        return self.name


def executor_type_choices() -> list[tuple[str, str | Promise]]:
    """The admin's choices, in the page's language (executors mark labels with gettext_noop)."""
    from apps.tools.executors import executor_choices

    return [(value, _(label)) for value, label in executor_choices()]


class ClientTool(TenantOwnedModel):
    """A tool the assistant may call for one client: its contract (JSON Schema parameters) and
    how it runs. Whatever the model claims, `kind` decides the safety rules."""

    name = models.CharField(max_length=64, verbose_name=_("name"))
    description = models.TextField(verbose_name=_("description"))
    kind = models.CharField(
        max_length=12, choices=ToolKind.choices, default=ToolKind.READ, verbose_name=_("kind")
    )
    parameters = models.JSONField(
        default=dict, help_text=_("JSON Schema of the tool's params."), verbose_name=_("parameters")
    )
    executor_type = models.CharField(
        max_length=10,
        choices=executor_type_choices,
        default=ExecutorType.WEBHOOK,
        verbose_name=_("executor type"),
    )
    webhook_url = models.URLField(max_length=500, blank=True, verbose_name=_("webhook url"))
    signing_secret = models.CharField(
        max_length=200,
        blank=True,
        help_text=_(
            "Standard Webhooks signing secret (whsec_…, or any secret of 8+ characters). "
            "Write-only: never shown after it is saved."
        ),
        verbose_name=_("signing secret"),
    )
    rotation_secret = models.CharField(
        max_length=200,
        blank=True,
        help_text=_(
            "A second active secret during a rotation: every request carries a signature "
            "with each. Write-only."
        ),
        verbose_name=_("rotation secret"),
    )
    builtin_handler = models.CharField(
        max_length=100, blank=True, verbose_name=_("builtin handler")
    )
    timeout_seconds = models.FloatField(default=10.0, verbose_name=_("timeout seconds"))
    max_retries = models.PositiveSmallIntegerField(default=2, verbose_name=_("max retries"))
    result_template = models.TextField(
        blank=True,
        help_text=_(
            "Optional reply after the tool ran, e.g. 'Order {order_id}: {result[status]}'. "
            "Empty = the assistant composes the reply."
        ),
        verbose_name=_("result template"),
    )
    display_name = models.JSONField(
        _("display name"),
        default=dict,
        blank=True,
        help_text=_(
            'What the customer reads for this tool, per language: {"en": "Cancel order", '
            '"es": "Cancelar pedido"}. Empty = the name, humanised.'
        ),
    )
    labels = models.JSONField(
        _("labels"),
        default=dict,
        blank=True,
        help_text=_(
            "What the customer reads for each parameter or result field, per language: "
            '{"es": {"order_id": "número de pedido"}}. Missing = the field name, humanised.'
        ),
    )
    enabled = models.BooleanField(default=True, verbose_name=_("enabled"))
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
        verbose_name=_("approval rule"),
    )
    # What a destructive call's object must be like before its question is asked
    # (apps/tools/preconditions.py); {} = always ask.
    precondition = models.JSONField(
        preconditions.LABEL, default=dict, blank=True, help_text=preconditions.HELP
    )
    # An MCP server's tool (executor "mcp"): the server, the tool's name there, and the
    # fingerprint (description + schema) of the definition as listed and as staff reviewed it.
    # A tool whose listed fingerprint differs from the reviewed one never runs.
    mcp_server = optional_fk(
        McpServer, _("MCP server"), on_delete=models.CASCADE, related_name="tools"
    )
    mcp_tool_name = models.CharField(_("MCP tool"), max_length=200, blank=True)
    mcp_fingerprint = models.CharField(_("listed definition"), max_length=64, blank=True)
    mcp_reviewed_fingerprint = models.CharField(_("reviewed definition"), max_length=64, blank=True)

    class Meta:
        verbose_name_plural = _("tools")
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

    conversation = conversation_fk(related_name="pending_actions")
    tool = models.ForeignKey(
        ClientTool, on_delete=models.CASCADE, related_name="+", verbose_name=_("tool")
    )
    params = models.JSONField(default=dict, verbose_name=_("params"))
    params_hash = models.CharField(max_length=64, verbose_name=_("params hash"))
    status = status_field(PendingActionStatus.PENDING, max_length=12)
    proposed_in = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        related_name="+",
        help_text=_("The customer message whose turn proposed the action."),
        verbose_name=_("proposed in"),
    )
    question = optional_fk(
        "conversations.Message",
        _("question"),
        help_text=_("The assistant's confirmation question."),
    )
    resolved_by = optional_fk(
        "conversations.Message",
        _("resolved by"),
        help_text=_("The customer message that confirmed or declined it."),
    )
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    idempotency_key = models.CharField(
        max_length=80, unique=True, verbose_name=_("idempotency key")
    )

    class Meta:
        verbose_name = _("pending action")
        verbose_name_plural = _("pending actions")
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

    conversation = optional_fk("conversations.Conversation", _("conversation"))
    trace = optional_fk("reasoning.ReasoningTrace", _("trace"), related_name="tool_executions")
    tool = models.ForeignKey(
        ClientTool, on_delete=models.PROTECT, related_name="executions", verbose_name=_("tool")
    )
    pending_action = optional_fk(
        PendingAction, _("pending action"), related_name="execution", one_to_one=True
    )
    params = models.JSONField(default=dict, verbose_name=_("params"))
    idempotency_key = models.CharField(
        max_length=80, unique=True, verbose_name=_("idempotency key")
    )
    status = status_field(ExecutionStatus.RUNNING, max_length=10)
    result = models.JSONField(null=True, blank=True, verbose_name=_("result"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    # What the business's refusal was, as a code the customer is told in their own language
    # (apps/tools/wording.py, ERROR_CODES); '' when it gave none.
    error_code = models.CharField(_("error code"), max_length=64, blank=True)
    failure_kind = models.CharField(
        max_length=12,
        choices=FailureKind.choices,
        default=FailureKind.NONE,
        blank=True,
        verbose_name=_("failure kind"),
    )
    attempts = models.PositiveSmallIntegerField(default=0, verbose_name=_("attempts"))
    latency_ms = models.PositiveIntegerField(default=0, verbose_name=_("latency ms"))

    class Meta:
        verbose_name = _("tool execution")
        verbose_name_plural = _("tool executions")
        indexes = [models.Index(fields=["client", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.tool.name} {self.status}"
