"""`import_client` — the tenant import format (docs/tenant-import.md). Parsing and validation
here; the writes are in `services.tenant_import`."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from apps.clients import modes
from apps.clients.business_info import business_info_errors
from apps.clients.deliberation import DeliberationSettings, deliberation_errors
from apps.clients.identity import public_key_problem
from apps.clients.models import (
    DEFAULT_CONVERSATION_TOKEN_BUDGET,
    DEFAULT_DELIBERATIVE_TURNS_PER_HOUR,
    DEFAULT_REMEMBER_CONVERSATION_HOURS,
    DEFAULT_VISITOR_DAILY_TOKEN_BUDGET,
    MAX_REMEMBER_CONVERSATION_HOURS,
    validate_origin,
)
from apps.core.exceptions import ApplicationError
from apps.core.languages import SHIPPED, normalise
from apps.core.schema_errors import json_path
from apps.escalations.models import TEMPLATE_BODY_MAX_CHARS, template_variables
from apps.identity.models import FIELD_PATH
from apps.knowledge import sources
from apps.knowledge.services.articles import (
    MAX_BODY_CHARS,
    MAX_FAQ_ANSWER_CHARS,
    MAX_RESYNC_HOURS,
    MAX_TITLE_CHARS,
    is_http_url,
)
from apps.mail.channels import mail_channel_problems
from apps.tools.approval_rules import approval_rule_problems
from apps.tools.identifiers import IDENTIFIER_KEYWORD
from apps.tools.mcp_settings import mcp_server_problems
from apps.tools.preconditions import precondition_problems
from apps.tools.wording import naming_problems

Slug = Annotated[str, Field(pattern=r"^[-a-zA-Z0-9_]+$", min_length=1, max_length=50)]
Money = Annotated[Decimal, Field(ge=0, max_digits=12, decimal_places=6)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ModelPriceIn(_Strict):
    model: str = Field(min_length=1, max_length=100)
    input_per_million: Money
    output_per_million: Money
    # Prompt tokens served from the provider's prompt cache; null = the input price.
    cached_input_per_million: Money | None = None
    context_tokens: int | None = Field(None, ge=1)


Multiplier = Annotated[Decimal, Field(ge=0, max_digits=6, decimal_places=3)]


class PlanNotesIn(_Strict):
    enabled: bool = True
    retention_days: int = Field(default=90, ge=1)
    prompt_budget_tokens: int = Field(default=400, ge=0)


class PlanIn(_Strict):
    slug: Slug
    name: str = Field(min_length=1, max_length=100)
    ai_mode: str = "standard"
    # Mode name → multiplier, for the registered modes (apps.clients.modes); a mode left out
    # gets its default.
    mode_multipliers: dict[str, Multiplier] = {}
    monthly_fee: Annotated[Decimal, Field(ge=0, max_digits=10, decimal_places=2)] = Decimal("0")
    included_turns: int = Field(default=0, ge=0)
    monthly_token_budget: int = Field(default=0, ge=0)
    monthly_turn_budget: int = Field(default=0, ge=0)
    per_turn_token_cap: int = Field(default=0, ge=0)
    conversation_token_budget: int = Field(default=DEFAULT_CONVERSATION_TOKEN_BUDGET, ge=0)
    visitor_daily_token_budget: int = Field(default=DEFAULT_VISITOR_DAILY_TOKEN_BUDGET, ge=0)
    deliberative_turns_per_hour: int = Field(
        default=DEFAULT_DELIBERATIVE_TURNS_PER_HOUR, ge=0, le=32767
    )
    # "Deliberate when needed": deliberate below this confidence (11 = always).
    deliberate_below_confidence: int = Field(default=7, ge=1, le=11)
    # Days a conversation is kept after its last message; 0 = kept (docs/privacy.md).
    conversation_retention_days: int = Field(default=0, ge=0)
    notes: PlanNotesIn = PlanNotesIn()
    # Deliberative mode (apps/clients/deliberation.py); left out: what the admin set stays.
    deliberation: DeliberationSettings | None = None

    @field_validator("deliberation")
    @classmethod
    def _deliberation_bounds(cls, value: DeliberationSettings | None) -> Any:
        if value is not None:
            errors = deliberation_errors(
                min_steps=value.min_steps, max_steps=value.max_steps, target=value.target
            )
            if errors:
                raise ValueError("; ".join(f"{key}: {text}" for key, text in errors.items()))
        return value

    @field_validator("ai_mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in modes.names():
            known = [f"'{name}'" for name in modes.names()]
            raise ValueError(f"Input should be {', '.join(known[:-1])} or {known[-1]}")
        return value

    @field_validator("mode_multipliers")
    @classmethod
    def _known_modes(cls, value: dict[str, Decimal]) -> dict[str, Decimal]:
        unknown = sorted(set(value) - set(modes.names()))
        if unknown:
            raise ValueError(
                f"unknown mode {', '.join(map(repr, unknown))} (known: {', '.join(modes.names())})"
            )
        return value

    def multipliers(self) -> dict[str, str]:
        """`Plan.multipliers`: every registered mode's, the file's or else the default."""
        values = {**modes.default_multipliers(), **self.mode_multipliers}
        return {name: modes.multiplier_text(value) for name, value in values.items()}


class WidgetIn(_Strict):
    allowed_origins: list[str] = []
    greeting: str = Field(default="Hi! How can I help?", max_length=500)
    # Under a knowledge answer, the titles (and links) of the articles it came from.
    show_sources: bool = True
    remember_conversation_hours: int = Field(
        default=DEFAULT_REMEMBER_CONVERSATION_HOURS, ge=0, le=MAX_REMEMBER_CONVERSATION_HOURS
    )

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        for origin in value:
            try:
                validate_origin(origin)
            except Exception as exc:
                raise ValueError(getattr(exc, "messages", [str(exc)])[0]) from None
        return value


class IdentityIn(_Strict):
    """Identity verification (docs/widget.md): the secret is never in the file — GuideDesk
    generates it (printed once) when `generate_secret` is true and the client has none."""

    generate_secret: bool = False
    public_key: str = Field(default="", max_length=10_000)
    signin_url: str = Field(default="", max_length=500, pattern=r"^(https?://\S+)?$")

    @field_validator("public_key")
    @classmethod
    def _public_key(cls, value: str) -> str:
        problem = public_key_problem(value) if value.strip() else ""
        if problem:
            raise ValueError(problem)
        return value.strip()


class ToolIn(_Strict):
    name: str = Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
    description: str = Field(min_length=1, max_length=2000)
    kind: Literal["read", "action", "destructive"]
    enabled: bool = True
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    # Checked against the executor's settings schema (`executor_errors`, parse_tenant_file).
    executor: dict[str, Any]
    result_template: str = Field(default="", max_length=2000)
    # What the customer reads, per language (apps/tools/wording.py): {"es": "Cancelar pedido"}
    # and {"es": {"order_id": "número de pedido"}}.
    display_name: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, Any] = Field(default_factory=dict)
    # When a call waits for a teammate's approval (apps/tools/approval_rules.py): {} = never.
    approval_rule: dict[str, Any] = Field(default_factory=dict)
    # Runs only for a verified customer, whose id its webhook receives (docs/widget.md).
    customer_scoped: bool = False
    # A destructive tool's read before its question (apps/tools/preconditions.py): {} = none.
    precondition: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _naming(self) -> ToolIn:
        problems = naming_problems(self.display_name, self.labels)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _approval_rule(self) -> ToolIn:
        problems = approval_rule_problems(self.approval_rule, self.parameters)
        if problems:
            raise ValueError("approval_rule: " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _precondition(self) -> ToolIn:
        # Its read tool is checked with the client's other tools (ClientIn._preconditions).
        problems = precondition_problems(
            self.precondition, kind=self.kind, parameters=self.parameters, read_tools=None
        )
        if problems:
            raise ValueError("precondition: " + "; ".join(problems))
        return self

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            where = json_path(exc.absolute_path)
            raise ValueError(
                f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"
            ) from None
        if value.get("type") != "object":
            raise ValueError('must be a JSON Schema with "type": "object"')
        for name, spec in (value.get("properties") or {}).items():
            marked = spec.get(IDENTIFIER_KEYWORD) if isinstance(spec, dict) else None
            if marked is not None and not isinstance(marked, bool):
                raise ValueError(f"properties.{name}.{IDENTIFIER_KEYWORD} must be true or false")
        return value


class ArticleIn(_Strict):
    """A knowledge article of the tenant file (or of a `*.md` file of `article_dir`)."""

    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    body: str = Field(min_length=1, max_length=MAX_BODY_CHARS)
    kind: Literal["article", "faq"] = "article"
    language: str = Field(default="", max_length=16)
    tags: list[Annotated[str, Field(max_length=50)]] = Field(default=[], max_length=20)
    enabled: bool = True
    status: Literal["published", "draft"] = "published"

    @model_validator(mode="after")
    def _faq_answer(self) -> ArticleIn:
        if self.kind == "faq" and len(self.body) > MAX_FAQ_ANSWER_CHARS:
            raise ValueError(
                f"an FAQ's answer (body) has at most {MAX_FAQ_ANSWER_CHARS} characters"
            )
        return self


class SourceIn(_Strict):
    """A knowledge source: typed in by staff, a web page or a sitemap (synced by the import
    task); an uploaded file is added in the admin or the API."""

    name: str = Field(min_length=1, max_length=200)
    # One of the kinds a tenant file may declare (apps/knowledge/sources/: not a file).
    kind: str
    url: str = Field(default="", max_length=2000)
    language: str = Field(default="", max_length=16)
    enabled: bool = True
    resync_hours: int = Field(default=24, ge=0, le=MAX_RESYNC_HOURS)

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, value: str) -> str:
        allowed = sources.tenant_file_names()
        if value not in allowed:
            expected = " or ".join(
                filter(None, [", ".join(map(repr, allowed[:-1])), repr(allowed[-1])])
            )
            raise PydanticCustomError(
                "literal_error", "Input should be {expected}", {"expected": expected}
            )
        return value

    @model_validator(mode="after")
    def _address(self) -> SourceIn:
        # A web kind's address is checked here, where the error can name the entry; every
        # kind's own rules run again when the source is saved (`source_errors`).
        web = isinstance(sources.get(self.kind), sources.WebSourceKind)
        if web and not is_http_url(self.url):
            raise ValueError(f"a {self.kind} source needs an http:// or https:// url")
        return self


class KnowledgeIn(_Strict):
    articles: list[ArticleIn] = []
    # Read into `articles` by the file loader (apps/provisioning/files.py), relative to the file.
    article_dir: str | None = None
    sources: list[SourceIn] = []

    @field_validator("article_dir")
    @classmethod
    def _read_by_the_loader(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError(
                "a directory is read relative to the tenant file: import the file with "
                "manage.py import_client (or load it with load_tenant_file)"
            )
        return value

    @model_validator(mode="after")
    def _unique(self) -> KnowledgeIn:
        titles = [(a.kind, a.title.casefold()) for a in self.articles]
        dupes = sorted({t for k, t in titles if titles.count((k, t)) > 1})
        if dupes:
            raise ValueError(f"duplicate article titles: {', '.join(dupes)}")
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate source names: {', '.join(dupes)}")
        return self


class EmailCodeIn(_Strict):
    """The e-mail one-time code (docs/widget.md): the read tool that finds the customer's
    address on file, and where its result holds the address and the customer's id."""

    tool: str = Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
    email_field: str = Field(pattern=FIELD_PATH.pattern, max_length=200)
    id_field: str = Field(default="", pattern=f"^$|{FIELD_PATH.pattern}", max_length=200)
    enabled: bool = True


class ReplyTemplateIn(_Strict):
    """A staff reply template (docs/api.md, "Reply templates"), matched by `shortcut`."""

    name: str = Field(min_length=1, max_length=80)
    shortcut: str = Field(pattern=r"^[-a-zA-Z0-9_]+$", min_length=1, max_length=40)
    body: str = Field(min_length=1, max_length=TEMPLATE_BODY_MAX_CHARS)

    @field_validator("body")
    @classmethod
    def _variables(cls, value: str) -> str:
        try:
            template_variables(value)
        except DjangoValidationError as exc:
            raise ValueError("; ".join(exc.messages)) from None
        return value


class McpAuthIn(_Strict):
    """How GuideDesk authenticates to an MCP server. The secrets (`token`, `client_secret`) are
    write-only: never exported, and left out (or empty) on import the stored one stays."""

    type: Literal["none", "bearer", "oauth"]
    token: str = Field(default="", max_length=2000)
    token_url: str = Field(default="", max_length=500, pattern=r"^(https?://\S+)?$")
    client_id: str = Field(default="", max_length=200)
    client_secret: str = Field(default="", max_length=500)
    scope: str = Field(default="", max_length=500)

    @model_validator(mode="after")
    def _keys_of_its_type(self) -> McpAuthIn:
        takes = {
            "none": {"type"},
            "bearer": {"type", "token"},
            "oauth": {"type", "token_url", "client_id", "client_secret", "scope"},
        }[self.type]
        other = sorted(self.model_fields_set - takes)
        if other:
            raise ValueError(f"{', '.join(other)}: not used by {self.type!r} authentication")
        return self


class McpServerIn(_Strict):
    """A client's MCP server (docs/mcp.md), upserted by name; checked like the admin's form
    (`mcp_server_problems`): the credentials its authentication needs when the file is
    imported, since a secret left out keeps the stored one."""

    name: str = Field(max_length=20)
    url: str = Field(max_length=500)
    auth: McpAuthIn
    timeout_seconds: float = 10.0
    customer_argument: str = Field(default="", max_length=64)
    customer_header: str = Field(default="", max_length=64)
    enabled: bool = True

    @field_validator("name", "url", "timeout_seconds")
    @classmethod
    def _as_the_admin_checks(cls, value: Any, info: ValidationInfo) -> Any:
        field = str(info.field_name)
        problem = mcp_server_problems({field: value}).get(field)
        if problem:
            raise ValueError(problem)
        return value


class MailChannelIn(_Strict):
    """A client's e-mail channel (docs/email.md), upserted by address; each field checked like
    the admin's form and the API (`mail_channel_problems`), and what `inbound_via` needs (the
    webhook secret, the IMAP mailbox) when the file is imported, since a secret left out
    keeps the stored one. Exported without its secrets."""

    address: str = Field(max_length=254)
    display_name: str = Field(default="", max_length=100)
    inbound_via: str
    webhook_secret: str = Field(default="", max_length=500)
    imap_host: str = Field(default="", max_length=255)
    imap_port: int = 993
    imap_ssl: bool = True
    imap_username: str = Field(default="", max_length=255)
    imap_password: str = Field(default="", max_length=500)
    imap_folder: str = Field(default="INBOX", max_length=255)
    trusted_authserv_id: str = Field(default="", max_length=255)
    max_replies_per_thread_hour: int = 5
    max_replies_per_sender_hour: int = 10
    max_attachment_bytes: int = 10 * 1024 * 1024
    enabled: bool = True

    @field_validator(
        "address",
        "inbound_via",
        "imap_port",
        "max_replies_per_thread_hour",
        "max_replies_per_sender_hour",
        "max_attachment_bytes",
    )
    @classmethod
    def _as_the_admin_checks(cls, value: Any, info: ValidationInfo) -> Any:
        field = str(info.field_name)
        problem = mail_channel_problems({field: value}).get(field)
        if problem:
            raise ValueError(problem)
        return value


class ClientIn(_Strict):
    slug: Slug
    name: str = Field(min_length=1, max_length=200)
    plan: Slug
    language: str = Field(default="en", min_length=2, max_length=16)
    # The languages the assistant answers in (apps.core.languages.SHIPPED codes); [] = only
    # `language`.
    languages: list[str] = []
    support_email: str = Field(default="", max_length=254)
    business_info: dict[str, Any] = {}
    widget: WidgetIn = WidgetIn()
    tools: list[ToolIn] = []
    identity: IdentityIn = IdentityIn()
    is_active: bool = True
    require_mfa: bool = False
    # Simulation test cases (docs/simulations.md), checked by `case_validate` (`_tests_errors`).
    tests: list[Any] = []
    # Knowledge articles and sources (FAQs come from `business_info.faqs`).
    knowledge: KnowledgeIn | None = None
    # The e-mail one-time code; left out: the setting stays as it is.
    email_code: EmailCodeIn | None = None
    # Staff reply templates: created or updated by shortcut, never deleted.
    reply_templates: list[ReplyTemplateIn] = []
    # When a person answers a hand-off (apps/clients/business_hours.py), checked by
    # `_business_hours_errors`; left out: the setting stays as it is; {} clears it.
    business_hours: dict[str, Any] | None = None
    # The client's MCP servers (docs/mcp.md): created or updated by name, never deleted; one
    # created or changed has its tools listed after the import (disabled until reviewed).
    mcp_servers: list[McpServerIn] = []
    # The client's e-mail channels (docs/email.md): created or updated by address, never
    # deleted; secrets left out keep the stored ones.
    mail_channels: list[MailChannelIn] = []

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        code = normalise(value)
        if code not in SHIPPED:
            raise ValueError(f"not a shipped language (one of {', '.join(SHIPPED)})")
        return code

    @field_validator("languages")
    @classmethod
    def _languages(cls, value: list[str]) -> list[str]:
        unknown = [code for code in value if normalise(code) not in SHIPPED]
        if unknown:
            raise ValueError(
                f"not shipped languages: {', '.join(unknown)} (one of {', '.join(SHIPPED)})"
            )
        return list(dict.fromkeys(normalise(code) for code in value))

    @field_validator("support_email")
    @classmethod
    def _email(cls, value: str) -> str:
        if value:
            try:
                validate_email(value)
            except DjangoValidationError:
                raise ValueError("not a valid e-mail address") from None
        return value

    @field_validator("business_info")
    @classmethod
    def _business_info(cls, value: dict[str, Any]) -> dict[str, Any]:
        errors = business_info_errors(value)
        if errors:
            raise ValueError("; ".join(f"{path}: {msg}" for path, msg in errors.items()))
        return value

    @model_validator(mode="after")
    def _default_is_allowed(self) -> ClientIn:
        if self.languages and self.language not in self.languages:
            self.languages.insert(0, self.language)  # the default is always answered in
        return self

    @model_validator(mode="after")
    def _email_code_tool(self) -> ClientIn:
        # A tool of this file must be a read tool; one not in the file is checked against the
        # client's stored tools when the file is imported (services._import_email_code).
        if self.email_code is not None:
            kinds = {tool.name: tool.kind for tool in self.tools}
            kind = kinds.get(self.email_code.tool)
            if kind is not None and kind != "read":
                raise ValueError(
                    f"email_code.tool: {self.email_code.tool!r} is a {kind} tool; the address "
                    "is looked up with a read tool"
                )
        return self

    @model_validator(mode="after")
    def _preconditions(self) -> ClientIn:
        # A read tool of this file is checked here; one not in the file against the client's
        # stored tools when the file is imported (services._check_preconditions).
        tools = {tool.name: (tool.kind, tool.parameters) for tool in self.tools}
        problems = [
            f"tools[{index}].precondition: {problem}"
            for index, tool in enumerate(self.tools)
            if tool.precondition and tool.precondition.get("tool") in tools
            for problem in precondition_problems(
                tool.precondition, kind=tool.kind, parameters=tool.parameters, read_tools=tools
            )
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _unique_shortcuts(self) -> ClientIn:
        shortcuts = [t.shortcut for t in self.reply_templates]
        dupes = sorted({s for s in shortcuts if shortcuts.count(s) > 1})
        if dupes:
            raise ValueError(f"reply_templates: shortcut used twice: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _unique_mail_channels(self) -> ClientIn:
        addresses = [channel.address.lower() for channel in self.mail_channels]
        dupes = sorted({a for a in addresses if addresses.count(a) > 1})
        if dupes:
            raise ValueError(f"mail_channels: address used twice: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _unique_mcp_servers(self) -> ClientIn:
        names = [server.name for server in self.mcp_servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"mcp_servers: name used twice: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _unique_tools(self) -> ClientIn:
        names = [tool.name for tool in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate tool names: {', '.join(dupes)}")
        return self


class TenantFile(_Strict):
    model_prices: list[ModelPriceIn] = []
    plans: list[PlanIn] = []
    clients: list[ClientIn] = []


def _loc(loc: tuple[Any, ...]) -> str:
    return json_path(list(loc)) or "(file)"


def executor_errors(executor: Any) -> dict[str, str]:
    """Problems with one `tools[].executor` object, by property ('' = the object): its `type`
    must be a registered executor and the rest must fit that executor's settings schema
    (apps/tools/executors/)."""
    from apps.tools.executors import executor_for, executors

    if not isinstance(executor, dict):
        return {"": "must be an object with a type"}
    found = executor_for(str(executor.get("type", "")))
    if found is None:
        return {"type": f"must be one of: {', '.join(executors())}"}
    return found.settings_errors(executor_settings(executor))


def executor_settings(executor: dict[str, Any]) -> dict[str, Any]:
    """The settings of a `tools[].executor` object: everything but its `type`, text stripped
    like every other string of the file."""
    return {
        key: value.strip() if isinstance(value, str) else value
        for key, value in executor.items()
        if key != "type"
    }


def _executors_errors(data: dict[str, Any]) -> dict[str, str]:
    errors: dict[str, str] = {}
    clients = data.get("clients")
    for i, client in enumerate(clients if isinstance(clients, list) else []):
        tools = client.get("tools") if isinstance(client, dict) else None
        for j, tool in enumerate(tools if isinstance(tools, list) else []):
            if not isinstance(tool, dict) or "executor" not in tool:
                continue
            for name, message in executor_errors(tool["executor"]).items():
                path = ["clients", i, "tools", j, "executor", *([name] if name else [])]
                errors[json_path(path)] = message
            if isinstance(tool["executor"], dict) and tool["executor"].get("type") == "mcp":
                # An MCP tool comes from its server's listing, held for review: a tools[] entry
                # could only make one without a server, which never runs.
                errors[json_path(["clients", i, "tools", j, "executor", "type"])] = (
                    "MCP tools are not declared here: declare the server under mcp_servers and "
                    "its tools are listed from it (disabled until staff review them)"
                )
    return errors


def _business_hours_errors(data: dict[str, Any]) -> dict[str, str]:
    """Problems with each client's `business_hours`, by path
    (`clients[0].business_hours.weekly.mon[1]`)."""
    from apps.clients.business_hours import business_hours_errors

    errors: dict[str, str] = {}
    clients = data.get("clients")
    for i, client in enumerate(clients if isinstance(clients, list) else []):
        if not isinstance(client, dict) or client.get("business_hours") is None:
            continue
        for path, message in business_hours_errors(client["business_hours"]).items():
            prefix = json_path(["clients", i, "business_hours"])
            errors[f"{prefix}.{path}" if path else prefix] = message
    return errors


def _tests_errors(data: dict[str, Any]) -> dict[str, str]:
    """Problems with each client's simulation test cases, by path
    (`clients[0].tests[2].turns[1].expect.tool_called`), and repeated case names."""
    from apps.simulations.schema import case_validate

    errors: dict[str, str] = {}
    clients = data.get("clients")
    for i, client in enumerate(clients if isinstance(clients, list) else []):
        tests = client.get("tests") if isinstance(client, dict) else None
        names: set[str] = set()
        for j, case in enumerate(tests if isinstance(tests, list) else []):
            prefix = json_path(["clients", i, "tests", j])
            if not isinstance(case, dict):
                errors[prefix] = "must be an object"
                continue
            try:
                name = case_validate(case)["name"]
            except ApplicationError as exc:
                fields = (exc.extra or {}).get("fields") or {"": exc.message}
                for path, message in fields.items():
                    where = (
                        f"{prefix}.{path}" if path and not path.startswith("[") else prefix + path
                    )
                    errors[where] = str(message)
                continue
            if name in names:
                errors[f"{prefix}.name"] = f"duplicate case name {name!r}"
            names.add(name)
    return errors


def parse_tenant_file(data: Any) -> TenantFile:
    """Validate a decoded tenant file; errors name the path of each bad field."""
    if not isinstance(data, dict):
        raise ApplicationError("The file must contain a JSON object.", code="invalid_file")
    fields: dict[str, str] = {}
    spec = None
    try:
        spec = TenantFile.model_validate(data)
    except ValidationError as exc:
        fields = {
            _loc(err["loc"]): err["msg"].removeprefix("Value error, ") for err in exc.errors()
        }
    fields |= _executors_errors(data)
    fields |= _tests_errors(data)
    fields |= _business_hours_errors(data)
    if fields or spec is None:
        lines = "\n".join(f"  {path}: {msg}" for path, msg in fields.items())
        raise ApplicationError(
            f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
        ) from None
    return spec
