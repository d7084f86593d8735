"""Tools admin: the client's tools (editable, validated like the tenant importer) and two
read-only audit lists — actions waiting for confirmation and every tool run."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Field
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.api.admin import (
    ClientSettingsAdmin,
    ReadOnlyAuditAdmin,
    ServiceCheckedForm,
    WriteOnlySecretFormField,
    pretty_json_block,
)
from apps.api.permissions import MANAGE
from apps.clients.admin import PrettyJSONField
from apps.clients.models import Client
from apps.conversations.admin import conversation_column
from apps.core.schema_errors import json_path
from apps.tools import mcp
from apps.tools.approval_rules import approval_rule_problems, approval_rule_text
from apps.tools.executors import executor_for, executors, settings_fields, settings_for
from apps.tools.executors import webhook as webhook_executor
from apps.tools.mcp import (
    SERVER_FIELDS,
    SyncReport,
    mcp_server_clean,
    mcp_server_sync,
    mcp_tool_review,
    mcp_tool_review_state,
)
from apps.tools.models import ClientTool, ExecutorType, McpServer, PendingAction, ToolExecution
from apps.tools.preconditions import precondition_problems
from apps.tools.wording import naming_problems

TOOL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")

PARAMETERS_HELP = _(
    "A JSON Schema object describing the details the assistant must collect before calling the "
    'tool, e.g. {"type": "object", "properties": {"order_id": {"type": "string"}}, '
    '"required": ["order_id"]}. The assistant asks the customer for anything required and '
    "GuideDesk checks the values against this schema before the tool runs."
)


SECRET_FIELDS = ("signing_secret", "rotation_secret")
# How save_model names a generated secret (the keys of ClientToolAdminForm.generated).
SECRET_LABELS = {"signing secret": _("signing secret"), "rotation secret": _("rotation secret")}


def schema_form_field(spec: dict[str, Any]) -> forms.Field:
    """A form field for one property of an executor's settings schema. Never required here:
    the chosen executor's schema decides in `clean`, since the other executors' rows stay on
    the page. A `writeOnly` property is a secret: empty = keep, never shown back."""
    common: dict[str, Any] = {
        # the executors mark their titles and descriptions with gettext_noop
        "label": _(spec["title"]) if spec.get("title") else None,
        "help_text": _(spec["description"]) if spec.get("description") else "",
        "required": False,
    }
    if spec.get("writeOnly"):
        return WriteOnlySecretFormField(max_length=spec.get("maxLength"), strip=True, **common)
    if "enum" in spec:
        return forms.ChoiceField(choices=[("", "—"), *((v, v) for v in spec["enum"])], **common)
    if spec.get("type") == "integer":
        return forms.IntegerField(
            min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common
        )
    if spec.get("type") == "number":
        return forms.FloatField(
            min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common
        )
    return forms.CharField(max_length=spec.get("maxLength"), **common)


def executor_form_fields() -> dict[str, forms.Field]:
    """The executor rows of the tool form, generated from every registered executor's settings
    schema: one per ClientTool column (a column two executors share, the timeout, once)."""
    fields: dict[str, forms.Field] = {}
    for executor in executors().values():
        for spec in executor.properties().values():
            fields.setdefault(spec["x-column"], schema_form_field(spec))
    return fields


def _json_field(
    label: Any, *, rows: int, help_text: Any, required: bool = False
) -> PrettyJSONField:
    """A JSON setting typed into a monospaced text box `rows` lines high."""
    area = forms.Textarea(attrs={"rows": rows, "cols": 90, "style": "font-family:monospace"})
    return PrettyJSONField(label=label, required=required, widget=area, help_text=help_text)


class ClientToolAdminForm(forms.ModelForm):
    """Secrets are write-only: the form has a "replace" and an "add rotation secret" field that
    start empty (empty = keep), never the stored value, and a secret that GuideDesk generates
    is shown once after saving."""

    generate_secret = forms.BooleanField(
        label=_("Generate a new signing secret"),
        required=False,
        help_text=_(
            "GuideDesk creates a whsec_ secret and shows it once after saving (a "
            "secret typed above takes precedence)."
        ),
    )
    generate_rotation_secret = forms.BooleanField(
        label=_("Generate a rotation secret"),
        required=False,
        help_text=_("GuideDesk creates a whsec_ rotation secret and shows it once after saving."),
    )
    rotation = forms.ChoiceField(
        label=_("Rotation"),
        required=False,
        choices=[
            ("", "—"),
            ("promote", _("End the rotation: the rotation secret becomes the only secret")),
            ("drop", _("Cancel the rotation: remove the rotation secret")),
        ],
    )
    parameters = _json_field(_("Parameters"), rows=16, help_text=PARAMETERS_HELP, required=True)
    display_name = _json_field(
        _("Display name"),
        rows=4,
        help_text=_(
            'Per language, e.g. {"en": "Cancel order", "es": "Cancelar pedido"}. Customers read '
            "it in confirmation questions and replies; a language without one gets English, "
            "else the name humanised."
        ),
    )
    labels = _json_field(
        _("Labels"),
        rows=6,
        help_text=_(
            'Per language, a label for each parameter or result field, e.g. {"es": {"order_id": '
            '"número de pedido"}}.'
        ),
    )
    approval_rule = _json_field(
        _("Needs a teammate's approval"),
        rows=3,
        help_text=_(
            'Empty = never. {"always": true} = every call; {"param": "amount", "above": 100} = '
            "a call when the sum of its amount (a number parameter) and the amounts of the "
            "earlier calls within 24 h, per conversation, per customer or per order, is above "
            '100 ("per", "order_param", "window_hours" and "group" change that). Optional '
            '"timeout_minutes": undecided after that long, a person takes the conversation. '
            "The approval comes after the customer's confirmation and every safety check."
        ),
    )
    precondition = _json_field(
        ClientTool._meta.get_field("precondition").verbose_name,
        rows=4,
        help_text=ClientTool._meta.get_field("precondition").help_text,
    )

    class Meta:
        model = ClientTool
        fields = [
            "client",
            "name",
            "description",
            "kind",
            "enabled",
            "customer_scoped",
            "parameters",
            "display_name",
            "labels",
            "approval_rule",
            "precondition",
            "executor_type",
            *settings_fields(),
            "result_template",
        ]
        widgets = {
            "executor_type": forms.RadioSelect,
            "kind": forms.RadioSelect,
        }
        help_texts = {
            "name": _(
                "Letters, digits and underscores, e.g. get_order_status. The assistant calls "
                "the tool by this name."
            ),
            "description": _("Tells the assistant when to use the tool — write it for the AI."),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in SECRET_FIELDS:  # never carry a stored secret into the page
            self.initial.pop(name, None)
        if self.instance.pk is None:  # a new tool gets a whsec_ secret unless one is typed
            self.fields["generate_secret"].initial = True
        self.generated: dict[str, str] = {}

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        if not TOOL_NAME_RE.match(name):
            raise forms.ValidationError(
                gettext(
                    "Use letters, digits and underscores only, starting with a letter or "
                    "underscore."
                )
            )
        return name

    def clean_parameters(self) -> Any:
        schema = self.cleaned_data.get("parameters")
        if not isinstance(schema, dict):
            raise forms.ValidationError(gettext('Must be a JSON object, e.g. {"type": "object"}.'))
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = json_path(exc.absolute_path)
            values = {"where": where, "message": exc.message}
            raise forms.ValidationError(
                gettext("Not a valid JSON Schema at %(where)s: %(message)s") % values
                if where
                else gettext("Not a valid JSON Schema: %(message)s") % values
            ) from None
        if schema.get("type") != "object":
            raise forms.ValidationError(
                gettext('The parameters must be a JSON Schema with "type": "object".')
            )
        return schema

    def _precondition(self, cleaned: dict[str, Any]) -> None:
        """Checked like the tenant file's (apps/tools/preconditions.py), against this client's
        other tools."""
        value = cleaned.get("precondition") or {}
        cleaned["precondition"] = value
        if not value or "precondition" in self.errors or "parameters" not in cleaned:
            return
        client = cleaned.get("client") or getattr(self.instance, "client", None)
        tools = (
            {
                t.name: (t.kind, t.parameters)
                for t in ClientTool.objects.for_client(client).exclude(pk=self.instance.pk)
            }
            if client is not None
            else {}
        )
        for problem in precondition_problems(
            value,
            kind=cleaned.get("kind") or "",
            parameters=cleaned["parameters"],
            read_tools=tools,
        ):
            self.add_error("precondition", problem)

    def _secrets(self, cleaned: dict[str, Any]) -> None:
        """Turn the write-only fields into the secrets to store (empty = keep)."""
        stored = self.instance if self.instance.pk else None
        signing = cleaned.get("signing_secret") or ""
        rotation = cleaned.get("rotation_secret") or ""
        if cleaned.get("generate_secret") and not signing:
            signing = self.generated["signing secret"] = webhook_executor.generate_secret()
        if cleaned.get("generate_rotation_secret") and not rotation:
            rotation = self.generated["rotation secret"] = webhook_executor.generate_secret()
        signing = signing or (stored.signing_secret if stored else "")
        rotation = rotation or (stored.rotation_secret if stored else "")
        action = cleaned.get("rotation")
        if action == "promote":
            if not rotation:
                self.add_error("rotation", gettext("There is no rotation secret to promote."))
            else:
                signing, rotation = rotation, ""
        elif action == "drop":
            rotation = ""
        cleaned["signing_secret"], cleaned["rotation_secret"] = signing, rotation

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self._secrets(cleaned)
        cleaned["display_name"] = cleaned.get("display_name") or {}
        cleaned["labels"] = cleaned.get("labels") or {}
        if "display_name" not in self.errors and "labels" not in self.errors:
            for problem in naming_problems(cleaned["display_name"], cleaned["labels"]):
                field = "labels" if problem.startswith("labels") else "display_name"
                self.add_error(field, problem)
        rule = cleaned.get("approval_rule") or {}
        cleaned["approval_rule"] = rule
        if "parameters" in cleaned and "approval_rule" not in self.errors:
            for problem in approval_rule_problems(rule, cleaned["parameters"]):
                self.add_error("approval_rule", problem)
        self._precondition(cleaned)
        executor = executor_for(cleaned.get("executor_type") or "")
        if executor is None:
            return cleaned
        # The chosen executor's settings schema decides (apps/tools/executors/).
        for field, message in executor.validate(cleaned).items():
            if field not in self.errors:
                self.add_error(field if field in self.fields else None, message)
        # Its settings with the schema's defaults; another type's are cleared, so no stale
        # secret or URL stays behind; a column no executor set keeps the model's default.
        own = executor.column_values(executor.settings_from_columns(cleaned))
        cleaned.update(settings_for(executor.type, own))
        for column in settings_fields():
            if cleaned.get(column) is None:
                model_field = ClientTool._meta.get_field(column)
                assert isinstance(model_field, Field)  # settings are plain columns
                cleaned[column] = model_field.get_default()
        if executor.type != "webhook":
            self.generated.clear()
        return cleaned


@admin.register(ClientTool)
class ClientToolAdmin(ClientSettingsAdmin):
    # Tools are configuration: admins and owners see and change them (like the tools API).
    form = ClientToolAdminForm
    list_display = [
        "name",
        "client",
        "kind",
        "executor_type",
        "enabled",
        "customer_scoped",
        "configured",
        "approval",
    ]
    list_filter = [
        "kind",
        "executor_type",
        "enabled",
        "customer_scoped",
        ("client", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["name", "description", "client__name"]
    fieldsets = [
        (
            _("What it does"),
            {
                "fields": ["client", "name", "description", "kind", "enabled"],
                "description": _(
                    "The kind decides the safety rules, whatever the AI says: "
                    "destructive tools (cancel, delete, refund) only run after the customer "
                    "confirmed these exact details in a later message."
                ),
            },
        ),
        (
            _("Whose data"),
            {
                "fields": ["customer_scoped"],
                "description": _(
                    "Tick it for a tool that acts on or shows one customer's data (their "
                    "orders, address, refunds): it then runs only when your site has verified "
                    "who the customer is, and its webhook receives the customer's id to check "
                    "ownership against. Left unticked, anyone chatting can call the tool with "
                    "any value they type, so it must reveal only what you would show a "
                    "stranger who knows that value (say, an order's status but not its "
                    "address)."
                ),
            },
        ),
        (_("Parameters (JSON Schema)"), {"fields": ["parameters"]}),
        (
            _("What the customer reads"),
            {
                "fields": ["display_name", "labels"],
                "description": _(
                    "The tool's name and its fields' labels in each language your customers "
                    "write in: GuideDesk uses them in confirmation questions, results and "
                    "errors (docs/tenant-import.md)."
                ),
            },
        ),
        (
            _("Teammate's approval"),
            {
                "fields": ["approval_rule"],
                "description": _(
                    "High-impact actions (a large refund) can wait for a teammate: the customer "
                    "is told the request is being checked, and staff approve or deny it in the "
                    "console (Approvals)."
                ),
            },
        ),
        (_("Check before asking"), {"fields": ["precondition"]}),
        (
            _("How it runs"),
            {
                "fields": [
                    "executor_type",
                    # generated from the executors' settings schemas (executor_form_fields)
                    *[f for f in settings_fields() if f not in SECRET_FIELDS],
                    "secrets_status",
                    "signing_secret",
                    "generate_secret",
                    "rotation_secret",
                    "generate_rotation_secret",
                    "rotation",
                ],
                "description": _(
                    "Webhook: GuideDesk sends a POST signed per Standard Webhooks "
                    'to your server and expects {"ok": true, "result": {…}}; needs the URL and a '
                    "signing secret (docs/webhooks.md). Built-in: one of GuideDesk's own handlers "
                    "runs the tool. Secrets are write-only: they are never shown once saved."
                ),
            },
        ),
        (
            _("Reply template"),
            {
                "fields": ["result_template"],
                "description": _(
                    "Optional. Leave empty to let the assistant word the reply "
                    "from the tool's result."
                ),
            },
        ),
    ]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        # The executor rows are generated from the registered executors' settings schemas.
        kwargs["form"] = type("ClientToolAdminForm", (self.form,), executor_form_fields())
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A tool never moves to another tenant: its runs and pending actions stay with it.
        return ["client", "secrets_status"] if obj is not None else ["secrets_status"]

    @admin.display(description=_("Approval"))
    def approval(self, obj: ClientTool) -> str:
        return approval_rule_text(obj.approval_rule) or "—"

    @admin.display(description=_("Secrets"))
    def secrets_status(self, obj: ClientTool | None) -> str:
        if obj is None or not obj.pk or not obj.signing_secret:
            return gettext("No signing secret yet.")
        if obj.rotation_secret:
            return gettext(
                "Signing secret set; rotation under way (requests carry both signatures)."
            )
        return gettext("Signing secret set.")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if obj.executor_type == ExecutorType.MCP:
            if "mcp_tool_name" in form.changed_data:
                # Another tool of the server: its definition is unknown until it is listed.
                obj.mcp_fingerprint = obj.mcp_reviewed_fingerprint = ""
                obj.enabled = False
            elif "enabled" in form.changed_data:
                mcp_tool_review(tool=obj)  # switched on: what the server lists now is reviewed
        super().save_model(request, obj, form, change)
        for what, secret in getattr(form, "generated", {}).items():
            # Shown this once (like an API key): give it to your webhook's verifier now.
            self.message_user(
                request,
                gettext(
                    "New %(what)s for %(name)s: %(secret)s — copy it now, it will not be shown "
                    "again."
                )
                % {"what": SECRET_LABELS.get(what, what), "name": obj.name, "secret": secret},
                messages.WARNING,
            )

    @admin.display(description=_("Configured"), boolean=True)
    def configured(self, obj: ClientTool) -> bool:
        return obj.is_configured


class McpServerForm(ServiceCheckedForm):
    """Secrets are write-only: an empty box keeps the saved one."""

    bearer_token = WriteOnlySecretFormField(
        label=_("bearer token"),
        max_length=2000,
        help_text=_("Sent as Authorization: Bearer …. Write-only: empty keeps the saved one."),
    )
    oauth_client_secret = WriteOnlySecretFormField(
        label=_("OAuth client secret"),
        max_length=500,
        help_text=_("Write-only: empty keeps the saved one."),
    )

    class Meta:
        model = McpServer
        fields = ("client", *SERVER_FIELDS)

    def service_clean(
        self, *, client: Client | None, values: dict[str, Any], instance: Any
    ) -> dict[str, Any]:
        """The rules of the API's (apps/tools/mcp.py, `mcp_server_clean`): one place for both."""
        return mcp_server_clean(client=client, values=values, server=instance)


class McpToolInline(admin.TabularInline):
    model = ClientTool
    fk_name = "mcp_server"
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name = _("tool")
    # The link to each tool's own page reads "View": the inline is read-only (Django names
    # the link after the inline's permission, not the tool page's).
    verbose_name_plural = _("Its tools (open each with View, read it, classify it, enable it)")
    fields = ("name", "mcp_tool_name", "kind", "enabled", "review")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("Review"))
    def review(self, obj: ClientTool) -> str:
        return mcp_review_text(obj)


def mcp_review_text(tool: ClientTool) -> str:
    state = mcp_tool_review_state(tool)
    if state == mcp.REMOVED:
        return gettext("No longer listed by the server.")
    if state == mcp.REVIEWED:
        return gettext("Reviewed.")
    if state == mcp.CHANGED:
        return gettext("Changed on the server since it was reviewed: read it again, then enable.")
    return gettext("New: read its description and schema, classify it, then enable.")


def report_message(report: SyncReport, server: McpServer) -> str:
    if report.error and not (report.added or report.changed or report.unchanged):
        return gettext("Listing the tools of %(server)s failed: %(error)s") % {
            "server": server.name,
            "error": report.error,
        }
    return gettext(
        "%(server)s: %(added)s new, %(changed)s changed, %(removed)s no longer listed, "
        "%(unchanged)s unchanged. New and changed tools are disabled until you review them."
    ) % {
        "server": server.name,
        "added": len(report.added),
        "changed": len(report.changed),
        "removed": len(report.removed),
        "unchanged": report.unchanged,
    }


@admin.register(McpServer)
class McpServerAdmin(ClientSettingsAdmin):
    """The client's MCP servers; saving one lists its tools (docs/mcp.md)."""

    form = McpServerForm
    inlines = [McpToolInline]
    list_display = ["name", "client", "url", "enabled", "last_synced_at", "last_error"]
    list_filter = ["enabled", ("client", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "url"]
    actions = ["list_tools"]
    readonly_fields = ["last_synced_at", "last_error"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(self.readonly_fields)
        return ["client", *fields] if obj is not None else fields

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if obj.enabled:
            report = mcp_server_sync(client=obj.client, server=obj)
            level = messages.WARNING if report.error or report.needs_review else messages.INFO
            self.message_user(request, report_message(report, obj), level)

    @admin.action(description=_("List tools now"))
    def list_tools(self, request: HttpRequest, queryset: Any) -> None:
        for server in queryset.select_related("client"):
            if not self.role_permits_on(request, server, MANAGE):
                continue
            report = mcp_server_sync(client=server.client, server=server)
            level = messages.WARNING if report.error or report.needs_review else messages.INFO
            self.message_user(request, report_message(report, server), level)


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


class ToolCallAdmin(ReadOnlyAuditAdmin):
    """The audit view of a tool call held for the customer or a teammate (a pending action, an
    approval request): its conversation and its params, short in the list and whole on the
    page."""

    list_display = [
        "created_at",
        "tool",
        "client",
        "conversation_short",
        "status",
        "params_short",
        "expires_at",
    ]
    list_select_related = ["client", "tool", "conversation"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]

    conversation_short = conversation_column(sortable=True)

    @admin.display(description=_("Params"))
    def params_short(self, obj: Any) -> str:
        return ", ".join(f"{k}={v}" for k, v in (obj.params or {}).items())[:80] or "-"

    @admin.display(description=_("Params"))
    def params_pretty(self, obj: Any) -> SafeString | str:
        return pretty_json_block(obj.params)


@admin.register(PendingAction)
class PendingActionAdmin(ToolCallAdmin):
    list_filter = ["status", "tool__kind", ("client", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["tool__name", "idempotency_key", "conversation__visitor_id"]
    fields = PENDING_ACTION_FIELDS
    readonly_fields = PENDING_ACTION_FIELDS


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

    conversation_short = conversation_column()

    @admin.display(description=_("Error"))
    def error_short(self, obj: ToolExecution) -> SafeString | str:
        if not obj.error:
            return "-"
        return format_html('<span title="{}">{}</span>', obj.error, obj.error[:60])

    @admin.display(description=_("Params"))
    def params_pretty(self, obj: ToolExecution) -> SafeString | str:
        return pretty_json_block(obj.params)

    @admin.display(description=_("Result"))
    def result_pretty(self, obj: ToolExecution) -> SafeString | str:
        return pretty_json_block(obj.result)
