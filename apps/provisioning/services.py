from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models, transaction

from apps.accounts.models import ApiKey
from apps.accounts.services import api_key_issue
from apps.billing.models import ModelPrice, VisitorUsage
from apps.clients.models import Client, Plan, normalize_origin
from apps.core.exceptions import ApplicationError
from apps.provisioning.importer import ClientIn, executor_settings, parse_tenant_file
from apps.simulations.cases import cases_import
from apps.tools.executors import executor_for, settings_for
from apps.tools.models import ClientTool


@dataclass
class ImportedClient:
    slug: str
    widget_key: str
    api_key: str | None  # a newly issued secret, shown once; None when the client had a key


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
        _upsert(ModelPrice, {"model": price.model}, fields)

    plans = {plan.slug: plan for plan in Plan.objects.all()}
    for p in spec.plans:
        plans[p.slug], _ = _upsert(
            Plan,
            {"slug": p.slug},
            {
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
                "notes_enabled": p.notes.enabled,
                "notes_retention_days": p.notes.retention_days,
                "notes_prompt_budget_tokens": p.notes.prompt_budget_tokens,
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
        results.append(_import_client(spec=c, plan=plan))
    return results


def _import_client(*, spec: ClientIn, plan: Plan) -> ImportedClient:
    client, _ = _upsert(
        Client,
        {"slug": spec.slug},
        {
            "name": spec.name,
            "plan": plan,
            "language": spec.language,
            "languages": spec.languages,
            "support_email": spec.support_email,
            "business_info": spec.business_info,
            "allowed_origins": [normalize_origin(o) for o in spec.widget.allowed_origins],
            "greeting": spec.widget.greeting,
            "remember_conversation_hours": spec.widget.remember_conversation_hours,
            "is_active": spec.is_active,
            "require_mfa": spec.require_mfa,
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
            **settings_for(executor.type, executor.column_values(settings)),
        }
        if "timeout_seconds" in values:
            values["timeout_seconds"] = float(values["timeout_seconds"])
        _upsert(ClientTool, {"client": client, "name": tool.name}, values)

    if spec.tests:
        # Validated with the file (parse_tenant_file); created or updated by name, never deleted.
        cases_import(client=client, data=spec.tests)

    secret = None
    if not ApiKey.objects.for_client(client).active().exists():
        _, secret = api_key_issue(client=client, name="Imported key")
    return ImportedClient(slug=client.slug, widget_key=client.widget_key, api_key=secret)


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
