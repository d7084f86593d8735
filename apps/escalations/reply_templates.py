"""Reply templates: a client's canned staff replies, and filling in their variables for one
conversation (docs/api.md, "Reply templates").

Where each variable's value comes from:

- `{customer_name}` — the name the customer gave, when the conversation holds one (the widget
  does not ask for a name today, so this is usually empty);
- `{order_id}` — the `order_id` parameter of the newest tool run or confirmation request of the
  conversation (what the assistant itself looked up, cancelled or refunded), never a guess from
  the customer's words;
- `{agent_name}` — the staff member sending the reply: their first name, else their full name,
  else the part of their e-mail address before the `@`.

A variable without a value stays in the text as `{name}` and the console selects it, so staff
type it in before sending; nothing is invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.core.exceptions import ApplicationError
from apps.core.schema import parse_uuid
from apps.escalations.models import (
    TEMPLATE_TOKEN,
    TEMPLATE_VARIABLES,
    ReplyTemplate,
)
from apps.tools.models import PendingAction, ToolExecution

EDITABLE_FIELDS = ("name", "shortcut", "body")


# -- reads -------------------------------------------------------------------------------------


def reply_template_list(*, client: Client) -> QuerySet[ReplyTemplate]:
    return ReplyTemplate.objects.for_client(client).order_by("name", "pk")


def reply_template_get(*, client: Client, template_id: str) -> ReplyTemplate | None:
    """The client's template with this public id; None for a malformed, unknown or another
    client's id alike."""
    public_id = parse_uuid(template_id)
    if public_id is None:
        return None
    return ReplyTemplate.objects.for_client(client).filter(public_id=public_id).first()


def _order_id(client: Client, conversation: Conversation) -> str:
    for model in (ToolExecution, PendingAction):
        rows = (
            model.objects.for_client(client)
            .filter(conversation=conversation, params__has_key="order_id")
            .order_by("-created_at", "-pk")
            .values_list("params", flat=True)[:1]
        )
        for params in rows:
            value = params.get("order_id") if isinstance(params, dict) else None
            if isinstance(value, str | int) and str(value).strip():
                return str(value).strip()
    return ""


def _agent_name(user: Any) -> str:
    if user is None or not getattr(user, "pk", None):
        return ""
    first = (getattr(user, "first_name", "") or "").strip()
    if first:
        return first
    full = user.get_full_name().strip() if hasattr(user, "get_full_name") else ""
    return full or str(getattr(user, "email", "") or "").split("@")[0]


def template_values(*, client: Client, conversation: Conversation, user: Any) -> dict[str, str]:
    """The value of every variable for this conversation and staff member ("" = unknown)."""
    return {
        "customer_name": str(getattr(conversation, "contact_name", "") or "").strip(),
        "order_id": _order_id(client, conversation),
        "agent_name": _agent_name(user),
    }


@dataclass(frozen=True)
class Rendered:
    text: str
    missing: list[str]  # variables left in the text as `{name}` for staff to fill in


def template_render(*, body: str, values: dict[str, str]) -> Rendered:
    missing: list[str] = []

    def replace(match: Any) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = (match.group(1) or "").strip()
        value = values.get(name, "")
        if name in TEMPLATE_VARIABLES and value:
            return value
        if name not in missing:
            missing.append(name)
        return token

    return Rendered(text=TEMPLATE_TOKEN.sub(replace, body), missing=missing)


# -- writes ------------------------------------------------------------------------------------


def _invalid(exc: ValidationError) -> ApplicationError:
    fields = {name: " ".join(str(m) for m in lines) for name, lines in exc.message_dict.items()}
    first = next(iter(fields.items()))
    return ApplicationError(f"{first[0]}: {first[1]}", {"fields": fields}, code="invalid")


def _save(template: ReplyTemplate) -> ReplyTemplate:
    try:
        # Uniqueness is checked below, within the client (a bare unique check would query
        # every tenant's rows).
        template.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise _invalid(exc) from None
    taken = ReplyTemplate.objects.for_client(template.client).filter(shortcut=template.shortcut)
    if template.pk is not None:
        taken = taken.exclude(pk=template.pk)
    if taken.exists():
        message = _("Another template already has this shortcut.")
        raise ApplicationError(message, {"fields": {"shortcut": message}}, code="invalid")
    try:
        with transaction.atomic():
            template.save()
    except IntegrityError:  # the same shortcut saved by someone else a moment ago
        message = _("Another template already has this shortcut.")
        raise ApplicationError(message, {"fields": {"shortcut": message}}, code="invalid") from None
    return template


@transaction.atomic
def reply_template_create(*, client: Client, name: str, shortcut: str, body: str) -> ReplyTemplate:
    """A new template; refused (naming the field) when a variable is unknown or the shortcut is
    taken."""
    return _save(ReplyTemplate(client=client, name=name.strip(), shortcut=shortcut, body=body))


@transaction.atomic
def reply_template_update(
    *, client: Client, template: ReplyTemplate, changes: dict[str, str]
) -> ReplyTemplate:
    if template.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    for field, value in changes.items():
        if field in EDITABLE_FIELDS:
            setattr(template, field, value.strip() if field == "name" else value)
    return _save(template)


def reply_template_delete(*, client: Client, template: ReplyTemplate) -> None:
    if template.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    template.delete()
