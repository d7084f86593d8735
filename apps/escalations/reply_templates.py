"""Reply templates: a client's canned staff replies, and filling in their variables for one
conversation (docs/api.md, "Reply templates").

A variable is filled only from data the customer's words cannot reach:

- `{customer_name}`, `{customer_email}` — the *verified* customer's name and e-mail
  (`Conversation.customer_name` / `customer_email`, only once `customer_verified_at` is set: a
  signed identity from the business's site, a provider-verified sender or a one-time code); a
  name the customer merely typed is never used;
- `{order_id}` — the order the conversation *acted on*: the `order_id` parameter of the newest
  tool run that succeeded, or of the newest action the customer confirmed, whichever is later.
  Never parsed from the customer's text, never "the last order mentioned": a failed run, or an
  action proposed but not confirmed, does not count;
- `{agent_name}` — the staff member sending the reply: their first name, else their full name,
  else the part of their e-mail address before the `@`.

Every value is validated (an order id must look like one: letters, digits, `-` and `_`, with a
digit, at most 40 characters; a name only letters, spaces and `'.-`); anything else leaves the
variable unfilled. An unfilled variable stays in the text as `{name}`, the console selects it
and refuses to send while it is there, and the server refuses a staff reply that still holds
one (`reply_check_filled`, called by `staff_reply`): nothing is invented, nothing half-filled
reaches a customer.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from apps.api.schema import parse_uuid
from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.core.exceptions import ApplicationError
from apps.escalations.models import (
    TEMPLATE_TOKEN,
    TEMPLATE_VARIABLES,
    ReplyTemplate,
)
from apps.tools.models import (
    ExecutionStatus,
    PendingAction,
    PendingActionStatus,
    ToolExecution,
)

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


# An order id as shops write them (TH-12345, 100234, A1B2_C3): ASCII letters, digits, "-" and
# "_", starting and ending with a letter or digit, with at least one digit. Nothing else — a
# space, a URL, a dot — so no sentence can ride into a staff reply as an "order id".
ORDER_ID_PATTERN = re.compile(
    r"(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9](?:[A-Za-z0-9_-]{0,38}[A-Za-z0-9])?"
)
NAME_MAX_CHARS = 80
_NAME_PUNCTUATION = frozenset(" '’.-")


def clean_order_id(value: Any) -> str:
    """`value` when it is an order id (ORDER_ID_PATTERN; a leading `#` is dropped), else ""."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return ""
    text = str(value).strip().removeprefix("#")
    return text if ORDER_ID_PATTERN.fullmatch(text) else ""


def clean_name(value: Any) -> str:
    """`value` (spaces collapsed) when it is a person's name — letters of any script and their
    marks, spaces and `'’.-`, starting with a letter, at most NAME_MAX_CHARS — else "", so no
    link, brace, digit or line break can ride along."""
    if not isinstance(value, str):
        return ""
    text = " ".join(part for part in value.split(" ") if part)  # (only spaces: no line breaks)
    if not text or len(text) > NAME_MAX_CHARS or not unicodedata.category(text[0]).startswith("L"):
        return ""
    for char in text:
        if char not in _NAME_PUNCTUATION and unicodedata.category(char)[0] not in "LM":
            return ""
    return text


def clean_email(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 254:
        return ""
    text = value.strip()
    if "{" in text or "}" in text:  # valid in an address, but never in a filled-in reply
        return ""
    try:
        validate_email(text)
    except ValidationError:
        return ""
    return text


def _order_id(client: Client, conversation: Conversation) -> str:
    """The order id the conversation acted on: the newest succeeded tool run or confirmed
    action that had an `order_id` parameter (validated; "" when that newest one's value is not
    an order id — never an older or a merely mentioned one instead)."""
    ran = (
        ToolExecution.objects.for_client(client)
        .filter(
            conversation=conversation,
            status=ExecutionStatus.SUCCEEDED,
            params__has_key="order_id",
        )
        .order_by("-created_at", "-pk")
        .values_list("created_at", "params")
        .first()
    )
    confirmed = (
        PendingAction.objects.for_client(client)
        .filter(
            conversation=conversation,
            status__in=(PendingActionStatus.CONFIRMED, PendingActionStatus.EXECUTED),
            params__has_key="order_id",
        )
        # (updated_at: when it was confirmed, or executed right after)
        .order_by("-updated_at", "-pk")
        .values_list("updated_at", "params")
        .first()
    )
    acted = [row for row in (ran, confirmed) if row is not None]
    if not acted:
        return ""
    _when, params = max(acted, key=lambda row: row[0])
    return clean_order_id(params.get("order_id") if isinstance(params, dict) else None)


def _agent_name(user: Any) -> str:
    if user is None or not getattr(user, "pk", None):
        return ""
    first = (getattr(user, "first_name", "") or "").strip()
    full = user.get_full_name().strip() if hasattr(user, "get_full_name") else ""
    local = str(getattr(user, "email", "") or "").split("@")[0]
    # Staff set their own names, but a brace or a line break would still break the reply.
    for candidate in (first, full, local):
        text = " ".join(candidate.replace("{", "").replace("}", "").split())
        if text:
            return text[:NAME_MAX_CHARS]
    return ""


def template_values(*, client: Client, conversation: Conversation, user: Any) -> dict[str, str]:
    """The value of every variable for this conversation and staff member ("" = unknown)."""
    verified = conversation.customer_verified_at is not None
    return {
        "customer_name": clean_name(conversation.customer_name) if verified else "",
        "customer_email": clean_email(conversation.customer_email) if verified else "",
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


# A template variable left in a reply: `{order_id}`, `{ order_id }` — not `{{order_id}}`, which
# a template writes for literal braces.
_PLACEHOLDER = re.compile(r"(?<!\{)\{\s*(" + "|".join(TEMPLATE_VARIABLES) + r")\s*\}(?!\})")


def unfilled_variables(text: str) -> list[str]:
    """The template variables still in a reply's text as `{name}`, in order, once each."""
    found: list[str] = []
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) not in found:
            found.append(match.group(1))
    return found


def reply_check_filled(text: str) -> None:
    """Refuse a staff reply that still holds a template variable (400 `unfilled_variable`,
    naming each): a reply must never reach the customer as "Hi {customer_name}"."""
    missing = unfilled_variables(text)
    if missing:
        names = ", ".join("{" + name + "}" for name in missing)
        message = _("Fill in %(names)s before sending: the reply still has a template variable.")
        message %= {"names": names}
        raise ApplicationError(
            message, {"fields": {"text": message}, "variables": missing}, code="unfilled_variable"
        )


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
