"""Tools admin: the client's tools (editable, validated like the tenant importer) and two
read-only audit lists — actions waiting for confirmation and every tool run."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.clients.admin import PrettyJSONField
from apps.clients.business_info import json_path
from apps.conversations.admin import conversation_link
from apps.core.admin import ReadOnlyAuditAdmin, TenantScopedAdmin, pretty_json_block
from apps.core.permissions import MANAGE
from apps.tools.builtins import BUILTIN_HANDLERS
from apps.tools.models import ClientTool, ExecutorType, PendingAction, ToolExecution

TOOL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
MIN_SECRET_LENGTH = 8
MAX_TIMEOUT_SECONDS = 60.0
MAX_RETRIES = 5

PARAMETERS_HELP = (
    "A JSON Schema object describing the details the assistant must collect before calling the "
    'tool, e.g. {"type": "object", "properties": {"order_id": {"type": "string"}}, '
    '"required": ["order_id"]}. The assistant asks the customer for anything required and '
    "GuideDesk checks the values against this schema before the tool runs."
)


def builtin_handler_choices() -> list[tuple[str, str]]:
    return [("", "—"), *((name, name) for name in sorted(BUILTIN_HANDLERS))]


class ClientToolAdminForm(forms.ModelForm):
    parameters = PrettyJSONField(
        widget=forms.Textarea(attrs={"rows": 16, "cols": 90, "style": "font-family:monospace"}),
        help_text=PARAMETERS_HELP,
    )
    builtin_handler = forms.ChoiceField(
        choices=builtin_handler_choices,
        required=False,
        help_text="Only for built-in tools: the GuideDesk function that runs the tool.",
    )

    class Meta:
        model = ClientTool
        fields = [
            "client",
            "name",
            "description",
            "kind",
            "enabled",
            "parameters",
            "executor_type",
            "webhook_url",
            "signing_secret",
            "timeout_seconds",
            "max_retries",
            "builtin_handler",
            "result_template",
        ]
        widgets = {
            # The secret is needed in clear to sign requests; mask it on screen only.
            "signing_secret": forms.PasswordInput(render_value=True),
            "executor_type": forms.RadioSelect,
            "kind": forms.RadioSelect,
        }
        help_texts = {
            "name": "Letters, digits and underscores, e.g. get_order_status. The assistant calls "
            "the tool by this name.",
            "description": "Tells the assistant when to use the tool — write it for the AI.",
            "webhook_url": "GuideDesk POSTs the call as JSON to this address.",
            "signing_secret": "Shared secret (at least 8 characters) used to sign every request "
            "in the X-GuideDesk-Signature header, so your server can tell it comes from us.",
            "timeout_seconds": "How long to wait for your server (at most 60 seconds).",
            "max_retries": "Retries after a timeout or a 5xx answer, with the same "
            "idempotency key (at most 5).",
        }

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if not TOOL_NAME_RE.match(name):
            raise forms.ValidationError(
                "Use letters, digits and underscores only, starting with a letter or underscore."
            )
        return name

    def clean_parameters(self) -> Any:
        schema = self.cleaned_data.get("parameters")
        if not isinstance(schema, dict):
            raise forms.ValidationError('Must be a JSON object, e.g. {"type": "object"}.')
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = json_path(exc.absolute_path)
            raise forms.ValidationError(
                f"Not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"
            ) from None
        if schema.get("type") != "object":
            raise forms.ValidationError(
                'The parameters must be a JSON Schema with "type": "object".'
            )
        return schema

    def clean_timeout_seconds(self) -> float:
        timeout: float = self.cleaned_data["timeout_seconds"]
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
            raise forms.ValidationError(
                f"Must be more than 0 and at most {MAX_TIMEOUT_SECONDS:g} seconds."
            )
        return timeout

    def clean_max_retries(self) -> int:
        retries: int = self.cleaned_data["max_retries"]
        if retries > MAX_RETRIES:
            raise forms.ValidationError(f"At most {MAX_RETRIES} retries.")
        return retries

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        executor = cleaned.get("executor_type")
        if executor == ExecutorType.WEBHOOK:
            if not cleaned.get("webhook_url") and "webhook_url" not in self.errors:
                self.add_error("webhook_url", "A webhook tool needs the URL to call.")
            secret = cleaned.get("signing_secret") or ""
            if not secret:
                self.add_error("signing_secret", "A webhook tool needs a signing secret.")
            elif len(secret) < MIN_SECRET_LENGTH:
                self.add_error(
                    "signing_secret",
                    f"The signing secret must be at least {MIN_SECRET_LENGTH} characters.",
                )
        elif executor == ExecutorType.BUILTIN:
            handler = cleaned.get("builtin_handler") or ""
            if handler not in BUILTIN_HANDLERS and "builtin_handler" not in self.errors:
                known = ", ".join(sorted(BUILTIN_HANDLERS))
                self.add_error(
                    "builtin_handler",
                    f"A built-in tool needs one of the known handlers: {known}.",
                )
        return cleaned


@admin.register(ClientTool)
class ClientToolAdmin(TenantScopedAdmin):
    # Tools are configuration: admins and owners see and change them (like the tools API).
    view_need = MANAGE
    change_need = MANAGE
    form = ClientToolAdminForm
    list_display = ["name", "client", "kind", "executor_type", "enabled", "configured"]
    list_filter = [
        "kind",
        "executor_type",
        "enabled",
        ("client", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["name", "description", "client__name"]
    list_select_related = ["client"]
    fieldsets = [
        (
            "What it does",
            {
                "fields": ["client", "name", "description", "kind", "enabled"],
                "description": "The kind decides the safety rules, whatever the AI says: "
                "destructive tools (cancel, delete, refund) only run after the customer "
                "confirmed these exact details in a later message.",
            },
        ),
        ("Parameters (JSON Schema)", {"fields": ["parameters"]}),
        (
            "How it runs",
            {
                "fields": [
                    "executor_type",
                    "webhook_url",
                    "signing_secret",
                    "timeout_seconds",
                    "max_retries",
                    "builtin_handler",
                ],
                "description": "Webhook: GuideDesk sends a signed POST to your server and "
                'expects {"ok": true, "result": {…}}; needs the URL and the signing secret. '
                "Built-in: one of GuideDesk's own handlers runs the tool.",
            },
        ),
        (
            "Reply template",
            {
                "fields": ["result_template"],
                "description": "Optional. Leave empty to let the assistant word the reply "
                "from the tool's result.",
            },
        ),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A tool never moves to another tenant: its runs and pending actions stay with it.
        return ["client"] if obj is not None else []

    @admin.display(description="Configured", boolean=True)
    def configured(self, obj: ClientTool) -> bool:
        return obj.is_configured


PENDING_ACTION_FIELDS: tuple[str, ...] = (
    "client",
    "conversation_short",
    "tool",
    "status",
    "params_pretty",
    "proposed_in",
    "question",
    "resolved_by",
    "expires_at",
    "idempotency_key",
    "created_at",
    "updated_at",
)


@admin.register(PendingAction)
class PendingActionAdmin(ReadOnlyAuditAdmin):
    list_display = [
        "created_at",
        "tool",
        "client",
        "conversation_short",
        "status",
        "params_short",
        "expires_at",
    ]
    list_filter = ["status", "tool__kind", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client", "tool", "conversation"]
    search_fields = ["tool__name", "idempotency_key", "conversation__visitor_id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    fields = PENDING_ACTION_FIELDS
    readonly_fields = PENDING_ACTION_FIELDS

    @admin.display(description="Conversation", ordering="conversation__created_at")
    def conversation_short(self, obj: PendingAction) -> SafeString | str:
        return conversation_link(obj.conversation)

    @admin.display(description="Params")
    def params_short(self, obj: PendingAction) -> str:
        return ", ".join(f"{k}={v}" for k, v in (obj.params or {}).items())[:80] or "-"

    @admin.display(description="Params")
    def params_pretty(self, obj: PendingAction) -> SafeString | str:
        return pretty_json_block(obj.params)


TOOL_EXECUTION_FIELDS: tuple[str, ...] = (
    "client",
    "conversation_short",
    "trace",
    "tool",
    "pending_action",
    "status",
    "params_pretty",
    "result_pretty",
    "error",
    "attempts",
    "latency_ms",
    "idempotency_key",
    "created_at",
    "updated_at",
)


@admin.register(ToolExecution)
class ToolExecutionAdmin(ReadOnlyAuditAdmin):
    list_display = [
        "created_at",
        "tool",
        "client",
        "conversation_short",
        "status",
        "attempts",
        "latency_ms",
        "error_short",
    ]
    list_filter = ["status", "tool__kind", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client", "tool", "conversation"]
    search_fields = ["tool__name", "idempotency_key", "error"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    fields = TOOL_EXECUTION_FIELDS
    readonly_fields = TOOL_EXECUTION_FIELDS

    @admin.display(description="Conversation")
    def conversation_short(self, obj: ToolExecution) -> SafeString | str:
        return conversation_link(obj.conversation)

    @admin.display(description="Error")
    def error_short(self, obj: ToolExecution) -> SafeString | str:
        if not obj.error:
            return "-"
        return format_html('<span title="{}">{}</span>', obj.error, obj.error[:60])

    @admin.display(description="Params")
    def params_pretty(self, obj: ToolExecution) -> SafeString | str:
        return pretty_json_block(obj.params)

    @admin.display(description="Result")
    def result_pretty(self, obj: ToolExecution) -> SafeString | str:
        return pretty_json_block(obj.result)
