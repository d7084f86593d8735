from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models, transaction

from apps.accounts.models import ApiKey
from apps.accounts.services import api_key_issue
from apps.billing.models import ModelPrice, VisitorUsage
from apps.clients.identity import client_identity_secret_rotate
from apps.clients.models import Client, Plan, normalize_origin
from apps.core.exceptions import ApplicationError
from apps.core.languages import normalise
from apps.escalations.reply_templates import (
    reply_template_create,
    reply_template_list,
    reply_template_update,
)
from apps.identity.selectors import email_code_setting
from apps.identity.services import email_code_setting_save
from apps.knowledge import sources
from apps.knowledge.models import Article, ArticleKind, ArticleStatus, KnowledgeSource
from apps.knowledge.services.articles import (
    article_create,
    article_update,
    source_create,
    source_update,
)
from apps.mail.channels import CHANNEL_FIELDS as MAIL_CHANNEL_FIELDS
from apps.mail.channels import SECRET_FIELDS as MAIL_SECRET_FIELDS
from apps.mail.channels import mail_channel_create, mail_channel_problems, mail_channel_update
from apps.mail.models import MailChannel
from apps.provisioning.importer import ClientIn, executor_settings, parse_tenant_file
from apps.simulations.cases import cases_import
from apps.tools.executors import executor_for, settings_for
from apps.tools.mcp_settings import mcp_server_problems, mcp_server_sync_on_commit
from apps.tools.models import ClientTool, McpAuth, McpServer
from apps.tools.preconditions import precondition_problems


@dataclass
class ImportedClient:
    slug: str
    widget_key: str
    api_key: str | None  # a newly issued secret, shown once; None when the client had a key
    # A newly generated identity secret (`identity.generate_secret`), shown once; else None.
    identity_secret: str | None = None


def _upsert[M: models.Model](
    model: type[M], lookup: dict[str, Any], values: dict[str, Any]
) -> tuple[M, bool]:
    """Create, or update only the fields that differ — so re-importing the same file writes
    nothing at all (timestamps included)."""
    obj = model._default_manager.filter(**lookup).first()
    if obj is None:
        return model._default_manager.create(**lookup, **values), True
    changed = [name for name, value in values.items() if getattr(obj, name) != value]
    for name in changed:
        setattr(obj, name, values[name])
    if changed:
        update_fields = changed + (["updated_at"] if hasattr(obj, "updated_at") else [])
        obj.save(update_fields=update_fields)
    return obj, bool(changed)


@transaction.atomic
def tenant_import(*, data: Any) -> list[ImportedClient]:
    """Create or update model prices, plans and clients (with business_info, widget settings,
    tools and simulation test cases) from a decoded tenant file. All or nothing: any error rolls
    everything back."""
    spec = parse_tenant_file(data)

    for price in spec.model_prices:
        fields: dict[str, Any] = {
            "input_per_million": price.input_per_million,
            "output_per_million": price.output_per_million,
        }
        if "context_tokens" in price.model_fields_set:  # left out: what the admin set stays
            fields["context_tokens"] = price.context_tokens
        if "cached_input_per_million" in price.model_fields_set:  # likewise
            fields["cached_input_per_million"] = price.cached_input_per_million
        _upsert(ModelPrice, {"model": price.model}, fields)

    plans = {plan.slug: plan for plan in Plan.objects.all()}
    for p in spec.plans:
        # Left out of the file, the plan's deliberative settings stay as the admin set them.
        deliberation = {"deliberation": p.deliberation.model_dump()} if p.deliberation else {}
        plans[p.slug], _ = _upsert(
            Plan,
            {"slug": p.slug},
            {
                **deliberation,
                "name": p.name,
                "ai_mode": p.ai_mode,
                "multipliers": p.multipliers(),
                "monthly_fee": p.monthly_fee,
                "included_turns": p.included_turns,
                "monthly_token_budget": p.monthly_token_budget,
                "monthly_turn_budget": p.monthly_turn_budget,
                "per_turn_token_cap": p.per_turn_token_cap,
                "conversation_token_budget": p.conversation_token_budget,
                "visitor_daily_token_budget": p.visitor_daily_token_budget,
                "deliberative_turns_per_hour": p.deliberative_turns_per_hour,
                "deliberate_below_confidence": p.deliberate_below_confidence,
                "notes_enabled": p.notes.enabled,
                "notes_retention_days": p.notes.retention_days,
                "notes_prompt_budget_tokens": p.notes.prompt_budget_tokens,
                "retention_days": p.conversation_retention_days,
            },
        )

    results = []
    for index, c in enumerate(spec.clients):
        plan = plans.get(c.plan)
        if plan is None:
            raise ApplicationError(
                f"Invalid tenant file:\n  clients[{index}].plan: unknown plan {c.plan!r}",
                {"fields": {f"clients[{index}].plan": f"unknown plan {c.plan!r}"}},
                code="invalid_file",
            )
        results.append(_import_client(spec=c, plan=plan, index=index))
    return results


def _import_client(*, spec: ClientIn, plan: Plan, index: int = 0) -> ImportedClient:
    client, _ = _upsert(
        Client,
        {"slug": spec.slug},
        {
            "name": spec.name,
            "plan": plan,
            "language": spec.language,
            "languages": spec.languages,
            "support_email": spec.support_email,
            # FAQs live as FAQ articles (`_import_knowledge`); the rest of the document here.
            "business_info": {k: v for k, v in spec.business_info.items() if k != "faqs"},
            "allowed_origins": [normalize_origin(o) for o in spec.widget.allowed_origins],
            "greeting": spec.widget.greeting,
            "show_sources": spec.widget.show_sources,
            "remember_conversation_hours": spec.widget.remember_conversation_hours,
            "is_active": spec.is_active,
            "require_mfa": spec.require_mfa,
            "identity_public_key": spec.identity.public_key,
            "signin_url": spec.identity.signin_url,
        },
    )
    for tool in spec.tools:
        executor = executor_for(tool.executor["type"])
        assert executor is not None  # the file was validated against the registry
        settings = executor_settings(tool.executor)
        values: dict[str, Any] = {
            "description": tool.description,
            "kind": tool.kind,
            "parameters": tool.parameters,
            "enabled": tool.enabled,
            "executor_type": executor.type,
            "result_template": tool.result_template,
            "display_name": tool.display_name,
            "labels": tool.labels,
            "approval_rule": tool.approval_rule,
            "precondition": tool.precondition,
            "customer_scoped": tool.customer_scoped,
            **settings_for(executor.type, executor.column_values(settings)),
        }
        if "timeout_seconds" in values:
            values["timeout_seconds"] = float(values["timeout_seconds"])
        _upsert(ClientTool, {"client": client, "name": tool.name}, values)
    _check_preconditions(client=client, spec=spec, index=index)

    if spec.email_code is not None:
        _import_email_code(client=client, spec=spec, index=index)

    if spec.business_hours is not None:
        _upsert(Client, {"pk": client.pk}, {"business_hours": spec.business_hours})

    _import_knowledge(client=client, spec=spec, index=index)

    if spec.tests:
        # Validated with the file (parse_tenant_file); created or updated by name, never deleted.
        cases_import(client=client, data=spec.tests)

    _import_reply_templates(client=client, spec=spec, index=index)

    _import_mcp_servers(client=client, spec=spec, index=index)
    _import_mail_channels(client=client, spec=spec, index=index)

    secret = None
    if not ApiKey.objects.for_client(client).active().exists():
        _, secret = api_key_issue(client=client, name="Imported key")
    identity_secret = None
    if spec.identity.generate_secret and not client.identity_secret:
        identity_secret = client_identity_secret_rotate(client=client)
    return ImportedClient(
        slug=client.slug,
        widget_key=client.widget_key,
        api_key=secret,
        identity_secret=identity_secret,
    )


def _check_preconditions(*, client: Client, spec: ClientIn, index: int) -> None:
    """A precondition's read tool that is not in the file must be one of the client's stored
    tools (the file's own were checked with the file: `ClientIn._preconditions`)."""
    stored = {t.name: (t.kind, t.parameters) for t in ClientTool.objects.for_client(client)}
    fields = {
        f"clients[{index}].tools[{i}].precondition": "; ".join(problems)
        for i, tool in enumerate(spec.tools)
        if tool.precondition
        and (
            problems := precondition_problems(
                tool.precondition, kind=tool.kind, parameters=tool.parameters, read_tools=stored
            )
        )
    }
    if fields:
        lines = "\n".join(f"  {path}: {message}" for path, message in fields.items())
        raise ApplicationError(
            f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
        )


def _import_reply_templates(*, client: Client, spec: ClientIn, index: int) -> None:
    """The file's reply templates, created or updated by shortcut (one unchanged is not written
    again); the client's other templates are left alone."""
    existing = {t.shortcut: t for t in reply_template_list(client=client)}
    for j, item in enumerate(spec.reply_templates):
        path = f"clients[{index}].reply_templates[{j}]"
        template = existing.get(item.shortcut)
        try:
            if template is None:
                reply_template_create(
                    client=client, name=item.name, shortcut=item.shortcut, body=item.body
                )
            elif (template.name, template.body) != (item.name.strip(), item.body):
                reply_template_update(
                    client=client,
                    template=template,
                    changes={"name": item.name, "body": item.body},
                )
        except ApplicationError as exc:
            _raise_invalid(exc, path)


def _import_mail_channels(*, client: Client, spec: ClientIn, index: int) -> None:
    """The file's e-mail channels, created or updated by address (case-insensitive); the
    client's other channels are left alone. A secret the file leaves out keeps the stored one;
    a new channel gets its own random inbound URL token (docs/email.md)."""
    existing = {c.address.lower(): c for c in MailChannel.objects.for_client(client)}
    fields: dict[str, str] = {}
    rows: list[tuple[MailChannel | None, dict[str, Any]]] = []
    for j, entry in enumerate(spec.mail_channels):
        stored = existing.get(entry.address.lower())
        values = entry.model_dump()
        kept = {
            column: getattr(stored, column) if stored is not None else ""
            for column in MAIL_SECRET_FIELDS
            if not values.get(column)
        }
        for column in kept:
            values.pop(column)
        # Each field was checked with the file; what `inbound_via` needs, with the stored
        # secrets, here.
        problems = mail_channel_problems({**values, **kept}, needs=True)
        for column, message in problems.items():
            fields[f"clients[{index}].mail_channels[{j}].{column}"] = message
        rows.append((stored, values))
    if fields:
        lines = "\n".join(f"  {path}: {message}" for path, message in fields.items())
        raise ApplicationError(
            f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
        )
    for stored, values in rows:
        if stored is None:
            mail_channel_create(client=client, **values)
        elif any(getattr(stored, column) != value for column, value in values.items()):
            mail_channel_update(client=client, channel=stored, **values)


# Where each McpServer column is in a `mcp_servers[]` entry of the file.
_MCP_SERVER_PATHS = {
    "bearer_token": "auth.token",
    "oauth_token_url": "auth.token_url",
    "oauth_client_id": "auth.client_id",
    "oauth_client_secret": "auth.client_secret",
    "oauth_scope": "auth.scope",
    "auth": "auth.type",
}


def _import_mcp_servers(*, client: Client, spec: ClientIn, index: int) -> None:
    """The file's MCP servers, created or updated by name (one unchanged is not written again);
    the client's other servers are left alone. A secret the file leaves out keeps the stored
    one. Each server created or changed, when enabled, has its tools listed in the background
    once the import commits: the import never waits on a client's server, and its new tools
    arrive disabled for staff to review (docs/mcp.md)."""
    existing = {s.name: s for s in McpServer.objects.for_client(client)}
    fields: dict[str, str] = {}
    rows: list[tuple[str, dict[str, Any]]] = []
    for j, entry in enumerate(spec.mcp_servers):
        stored = existing.get(entry.name)
        auth = entry.auth
        oauth = auth.type == McpAuth.OAUTH
        values: dict[str, Any] = {
            "url": entry.url,
            "auth": auth.type,
            "oauth_token_url": auth.token_url if oauth else "",
            "oauth_client_id": auth.client_id if oauth else "",
            "oauth_scope": auth.scope if oauth else "",
            "timeout_seconds": float(entry.timeout_seconds),
            "customer_argument": entry.customer_argument,
            "customer_header": entry.customer_header,
            "enabled": entry.enabled,
        }
        secrets = {"bearer_token": auth.token, "oauth_client_secret": auth.client_secret}
        values |= {column: secret for column, secret in secrets.items() if secret}
        kept = {
            column: getattr(stored, column) if stored is not None else ""
            for column in secrets
            if column not in values
        }
        # Name, URL and timeout were checked with the file; what the authentication needs,
        # with the stored secrets, here.
        checked = {**values, **kept}
        problems = mcp_server_problems({column: checked[column] for column in _MCP_SERVER_PATHS})
        for column, message in problems.items():
            fields[f"clients[{index}].mcp_servers[{j}].{_MCP_SERVER_PATHS[column]}"] = message
        rows.append((entry.name, values))
    if fields:
        lines = "\n".join(f"  {path}: {message}" for path, message in fields.items())
        raise ApplicationError(
            f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
        )
    for name, values in rows:
        server, changed = _upsert(McpServer, {"client": client, "name": name}, values)
        if changed and server.enabled:
            mcp_server_sync_on_commit(client=client, server=server)


def _raise_invalid(exc: ApplicationError, path: str) -> None:
    """Re-raise a service's refusal as the tenant file's error, each field under `path`."""
    fields = {
        f"{path}.{name}": message if isinstance(message, str) else "; ".join(message)
        for name, message in ((exc.extra or {}).get("fields") or {}).items()
    } or {path: str(exc)}
    lines = "\n".join(f"  {p}: {message}" for p, message in fields.items())
    raise ApplicationError(
        f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
    ) from None


def _import_email_code(*, client: Client, spec: ClientIn, index: int) -> None:
    code = spec.email_code
    assert code is not None
    try:
        email_code_setting_save(
            client=client,
            tool_name=code.tool,
            email_field=code.email_field,
            id_field=code.id_field,
            enabled=code.enabled,
        )
    except ApplicationError as exc:
        fields = {
            f"clients[{index}].email_code.{name}": message
            for name, message in ((exc.extra or {}).get("fields") or {}).items()
        }
        lines = "\n".join(f"  {path}: {message}" for path, message in fields.items())
        raise ApplicationError(
            f"Invalid tenant file:\n{lines}", {"fields": fields}, code="invalid_file"
        ) from None


# --------------------------------------------------------------------------------------------
# Knowledge: `business_info.faqs` → FAQ articles, `knowledge.articles` and `knowledge.sources`
# --------------------------------------------------------------------------------------------


def _import_knowledge(*, client: Client, spec: ClientIn, index: int = 0) -> None:
    """Upsert the file's articles by title (FAQs by question), source-less only, through the
    content services — an unchanged article is not written (nor indexed) again. The client's
    source-less articles of a kind the file no longer lists are removed only when the file
    speaks for that kind: FAQs when `business_info` has a `faqs` key, articles when the client
    has a `knowledge` entry. Sources are upserted by name and never removed here."""
    language = normalise(client.language)
    wanted: list[dict[str, Any]] = []
    faqs = spec.business_info.get("faqs")
    for faq in faqs if isinstance(faqs, list) else []:
        wanted.append(
            {
                "kind": ArticleKind.FAQ,
                "title": faq["question"].strip(),
                "body": faq["answer"].strip(),
                "language": language,
                "tags": [],
                "enabled": True,
                "status": ArticleStatus.PUBLISHED,
            }
        )
    knowledge = spec.knowledge
    for entry in knowledge.articles if knowledge else []:
        wanted.append(
            {
                "kind": entry.kind,
                "title": entry.title.strip(),
                "body": entry.body.strip(),
                "language": normalise(entry.language),
                "tags": entry.tags,
                "enabled": entry.enabled,
                "status": entry.status,
            }
        )
    existing = {
        (a.kind, a.title.strip().casefold()): a
        for a in Article.objects.for_client(client).filter(source__isnull=True).order_by("-pk")
    }
    kept: set[int] = set()
    for values in wanted:
        key = (values["kind"], values["title"].casefold())
        article = existing.get(key)
        if article is None:
            article = article_create(client=client, data=values)
            existing[key] = article
        else:
            changed = {name: v for name, v in values.items() if getattr(article, name) != v}
            if changed:
                article = article_update(article=article, data=changed)
        kept.add(article.pk)
    stale_kinds = []
    if "faqs" in spec.business_info:
        stale_kinds.append(ArticleKind.FAQ)
    if knowledge is not None:
        stale_kinds.append(ArticleKind.ARTICLE)
    if stale_kinds:
        stale = Article.objects.for_client(client).filter(source__isnull=True, kind__in=stale_kinds)
        # an FAQ listed under knowledge.articles counts for the FAQs too
        stale.exclude(pk__in=kept).delete()
    for number, source in enumerate(knowledge.sources if knowledge else []):
        values = {
            "kind": source.kind,
            "url": source.url.strip() if sources.kind_of(source.kind).reads("url") else "",
            "language": normalise(source.language),
            "enabled": source.enabled,
            "resync_hours": source.resync_hours,
        }
        found = KnowledgeSource.objects.for_client(client).filter(name=source.name).first()
        if found is None:
            try:
                source_create(client=client, data={"name": source.name, **values})
            except ApplicationError as exc:
                _raise_invalid(exc, f"clients[{index}].knowledge.sources[{number}]")
            continue
        changed = {name: v for name, v in values.items() if getattr(found, name) != v}
        if changed:
            source_update(source=found, data=changed)


def client_export(*, client: Client) -> dict[str, Any]:
    """The client as a tenant file's `clients[]` entry (docs/tenant-import.md): its settings,
    `business_info` with its FAQs (the usable FAQ articles), and `knowledge` — every other
    source-less article (drafts, disabled FAQs and their state included) and the web sources.
    Tools are left out: their secrets are write-only (and MCP tools come from their server).
    MCP servers are in, without their secrets. Importing the entry again changes nothing."""
    info = dict(client.business_info) if isinstance(client.business_info, dict) else {}
    faqs = []
    articles = []
    rows = Article.objects.for_client(client).filter(source__isnull=True).order_by("kind", "pk")
    language = normalise(client.language)
    for article in rows:
        plain_faq = (
            article.kind == ArticleKind.FAQ
            and article.status == ArticleStatus.PUBLISHED
            and article.enabled
            and not article.tags
            and article.language in ("", language)
        )
        if plain_faq:
            faqs.append({"question": article.title, "answer": article.body})
            continue
        entry: dict[str, Any] = {"title": article.title, "body": article.body}
        if article.kind != ArticleKind.ARTICLE:
            entry["kind"] = article.kind
        if article.language:
            entry["language"] = article.language
        if article.tags:
            entry["tags"] = list(article.tags)
        if not article.enabled:
            entry["enabled"] = False
        if article.status != ArticleStatus.PUBLISHED:
            entry["status"] = article.status
        articles.append(entry)
    info["faqs"] = faqs
    source_entries = [
        {
            "name": s.name,
            "kind": s.kind,
            **sources.kind_of(s.kind).tenant_file_entry(s),
            **({"language": s.language} if s.language else {}),
            "enabled": s.enabled,
            "resync_hours": s.resync_hours,
        }
        for s in KnowledgeSource.objects.for_client(client)
        .filter(kind__in=sources.tenant_file_names())
        .order_by("name", "pk")
    ]
    return {
        "slug": client.slug,
        "name": client.name,
        "plan": client.plan.slug,
        "language": client.language,
        "support_email": client.support_email,
        "business_info": info,
        "widget": {
            "allowed_origins": list(client.allowed_origins or []),
            "greeting": client.greeting,
            "show_sources": client.show_sources,
            "remember_conversation_hours": client.remember_conversation_hours,
        },
        "is_active": client.is_active,
        "require_mfa": client.require_mfa,
        # The identity secret is write-only: never exported (the public key is public).
        **(
            {
                "identity": {
                    "public_key": client.identity_public_key,
                    "signin_url": client.signin_url,
                }
            }
            if client.identity_public_key or client.signin_url
            else {}
        ),
        "knowledge": {"articles": articles, "sources": source_entries},
        **_email_code_export(client),
        **_reply_templates_export(client),
        **({"business_hours": client.business_hours} if client.business_hours else {}),
        **_mcp_servers_export(client),
        **_mail_channels_export(client),
    }


def _mail_channels_export(client: Client) -> dict[str, Any]:
    """The client's e-mail channels without their secrets (the webhook secret, the IMAP
    password) nor their inbound URL token: importing the entry again keeps the stored ones."""
    rows = [
        {column: getattr(channel, column) for column in MAIL_CHANNEL_FIELDS}
        for channel in MailChannel.objects.for_client(client).order_by("address")
    ]
    for row in rows:
        for secret in MAIL_SECRET_FIELDS:
            row.pop(secret)
    return {"mail_channels": rows} if rows else {}


def _mcp_servers_export(client: Client) -> dict[str, Any]:
    """The client's MCP servers without their secrets (the token, the client secret): importing
    the entry again keeps the stored ones. Their tools are not exported: they are listed from
    the server."""
    rows = []
    for server in McpServer.objects.for_client(client).order_by("name"):
        auth: dict[str, Any] = {"type": server.auth}
        if server.auth == McpAuth.OAUTH:
            auth |= {
                "token_url": server.oauth_token_url,
                "client_id": server.oauth_client_id,
                "scope": server.oauth_scope,
            }
        rows.append(
            {
                "name": server.name,
                "url": server.url,
                "auth": auth,
                "timeout_seconds": server.timeout_seconds,
                "customer_argument": server.customer_argument,
                "customer_header": server.customer_header,
                "enabled": server.enabled,
            }
        )
    return {"mcp_servers": rows} if rows else {}


def _reply_templates_export(client: Client) -> dict[str, Any]:
    rows = [
        {"name": t.name, "shortcut": t.shortcut, "body": t.body}
        for t in reply_template_list(client=client)
    ]
    return {"reply_templates": rows} if rows else {}


def _email_code_export(client: Client) -> dict[str, Any]:
    setting = email_code_setting(client=client)
    if setting is None:
        return {}
    return {
        "email_code": {
            "tool": setting.tool_name,
            "email_field": setting.email_field,
            "id_field": setting.id_field,
            "enabled": setting.enabled,
        }
    }


# --------------------------------------------------------------------------------------------
# The local demo (`make demo-reset`, `manage.py demo_reset`)
# --------------------------------------------------------------------------------------------

DEMO_HANDLER_PREFIX = "demo."


@dataclass(frozen=True)
class DemoReset:
    slug: str
    conversations: int
    tool_runs: int
    notes: int


@transaction.atomic
def demo_reset(*, data: Any) -> list[DemoReset]:
    """Put the demo shops of a tenant file back as `make demo` first made them: their
    conversations (with messages, turns, hand-offs and pending confirmations), tool runs — the
    demo order book is derived from them, so a cancelled order is open again — and notes are
    deleted, then the file is imported again (plan, settings and tools as shipped). Idempotent;
    all or nothing. Only clients of the file whose tools run the built-in `demo.*` handlers are
    touched: anything else in the file is refused, and other clients are never read."""
    from apps.conversations.models import Conversation
    from apps.notes.services import notes_delete
    from apps.tools.models import ToolExecution

    spec = parse_tenant_file(data)
    results: list[DemoReset] = []
    for client_spec in spec.clients:
        client = Client.objects.filter(slug=client_spec.slug).first()
        if client is None:
            continue  # not imported yet: the import below creates it fresh
        is_demo = (
            ClientTool.objects.for_client(client)
            .filter(builtin_handler__startswith=DEMO_HANDLER_PREFIX)
            .exists()
        )
        if not is_demo:
            raise ApplicationError(
                f"Client {client.slug!r} is not a demo shop (none of its tools runs a built-in "
                f"demo handler); demo_reset deletes data and only resets demo shops."
            )
        tool_runs = ToolExecution.objects.for_client(client).count()
        ToolExecution.objects.for_client(client).delete()
        conversations = Conversation.objects.for_client(client).count()
        Conversation.objects.for_client(client).delete()
        notes = notes_delete(client=client)
        # The demo visitor's daily budget starts afresh too, or the flows hit its limit.
        VisitorUsage.objects.for_client(client).delete()
        results.append(
            DemoReset(
                slug=client.slug, conversations=conversations, tool_runs=tool_runs, notes=notes
            )
        )
    tenant_import(data=data)
    return results
