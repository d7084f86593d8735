"""The e-mail one-time code (docs/widget.md "E-mail one-time code").

A shop without a login verifies who a customer is with a code sent to the address ON FILE: the
client's `EmailCodeSetting` names a read tool and the result field that holds the address, the
tool runs through the normal execution path with the details the customer gave (an order
number), and a 6-digit code goes to the address the tool returned — never to one the visitor
typed. A correct code within 10 minutes and 5 tries marks the conversation verified
(`Conversation.customer_*`, via `email_code`).

Entry points: `otp_offer` (send a code; the guard's "unverified → refused" path calls it),
`otp_check` (check one), and for the turn pipeline `email_code_in` / `redact_codes` /
`otp_check_text` (apps/reasoning/services.py checks a typed code before any LLM call and stores
the message with the code masked).

This is its own app, not `apps/conversations/otp.py`: it runs a tool (apps.tools), which sits
above conversations in the layering contract, and the turn pipeline (apps.reasoning, above it)
calls it."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_lazy, ngettext
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.clients.models import Client
from apps.conversations.models import Conversation, CustomerVerification
from apps.core.exceptions import ApplicationError
from apps.identity.models import (
    ChallengeStatus,
    EmailCodeChallenge,
    EmailCodeSetting,
    validate_field_path,
)
from apps.identity.selectors import challenge_open, email_code_setting
from apps.tools.models import ClientTool, ExecutionStatus, FailureKind, ToolExecution, ToolKind
from apps.tools.services import tool_execute

logger = logging.getLogger(__name__)

CODE_DIGITS = 6
CODE_TTL = timedelta(minutes=10)
MAX_WRONG_CODES = 5
# Challenges older than this are deleted by the hourly `identity.purge_email_codes` task (the
# rate-limit windows are one hour); an erased conversation takes its challenges with it.
CHALLENGE_KEEP = timedelta(hours=24)
_HOUR = timedelta(hours=1)
# Six digits, optionally split in two by a space or a hyphen ("123 456"), in any script's
# digits (`\d` is Unicode: ١٢٣٤٥٦ is a code too); not part of a longer number.
_CODE = re.compile(r"(?<!\d)(\d{3})[ \-]?(\d{3})(?!\d)")
REDACTED = "••••••"


class OfferStatus:
    SENT = "sent"
    NOT_CONFIGURED = "not_configured"
    UNAVAILABLE = "unavailable"
    INVALID_PARAMS = "invalid_params"
    NOT_FOUND = "not_found"
    ADDRESS_LIMIT = "address_limit"
    VISITOR_LIMIT = "visitor_limit"


class CheckStatus:
    VERIFIED = "verified"
    WRONG = "wrong"
    EXHAUSTED = "exhausted"
    EXPIRED = "expired"
    NO_CODE = "no_code"
    ERROR = "error"


@dataclass(frozen=True)
class OtpOffer:
    """What `otp_offer` did; `message` is for the customer, in the conversation's language, and
    names the address masked (j***@example.com)."""

    status: str
    message: str
    challenge: EmailCodeChallenge | None = None

    @property
    def sent(self) -> bool:
        return self.status == OfferStatus.SENT


@dataclass(frozen=True)
class OtpCheck:
    """What `otp_check` decided; `data` is what the turn stores on the customer's message (no
    code, no address in full) to word its reply."""

    status: str
    message: str
    tries_left: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return self.status == CheckStatus.VERIFIED


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def mask_email(address: str) -> str:
    """j***@example.com: enough for the customer to recognise their address, not to learn it."""
    local, _, domain = address.partition("@")
    return f"{local[:1]}***@{domain}"


def _ascii_digits(text: str) -> str:
    return "".join(str(unicodedata.decimal(ch)) for ch in text if ch.isdecimal())


def find_code(text: str) -> str | None:
    """The first 6-digit code in a message (ASCII digits), or None."""
    found = _CODE.search(text or "")
    if found is None:
        return None
    return _ascii_digits(found.group(1) + found.group(2))


def redact_codes(text: str) -> str:
    """The message as stored: every 6-digit code replaced, so no later prompt carries it."""
    return _CODE.sub(REDACTED, text)


def email_code_in(*, client: Client, conversation: Conversation, text: str) -> str | None:
    """The code a customer message carries while the conversation waits for one, else None."""
    code = find_code(text)
    if code is None or challenge_open(client=client, conversation=conversation) is None:
        return None
    return code


def result_field(result: Any, path: str) -> Any:
    """`customer.email` of a tool result (dicts by key, lists by index); None when missing."""
    value = result
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _code_hash(public_id: uuid.UUID, code: str) -> str:
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"email-code:{public_id}:{code}".encode(), hashlib.sha256).hexdigest()


def _language(client: Client, conversation: Conversation) -> str | None:
    return conversation.language or client.language or None


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


def email_code_setting_errors(
    *, client: Client, tool_name: str, email_field: str, id_field: str = ""
) -> dict[str, str]:
    """Problems with a setting, by field: the tool must be one of the client's read tools and
    the fields dotted paths."""
    errors: dict[str, str] = {}
    tool = ClientTool.objects.for_client(client).filter(name=tool_name).first()
    if tool is None:
        errors["tool"] = gettext("%(client)s has no tool named %(tool)s.") % {
            "client": client.name,
            "tool": repr(tool_name),
        }
    elif tool.kind != ToolKind.READ:
        errors["tool"] = gettext(
            "%(tool)s is not a read tool: the address is looked up with a tool that only "
            "retrieves information."
        ) % {"tool": repr(tool_name)}
    for name, value, required in (
        ("email_field", email_field, True),
        ("id_field", id_field, False),
    ):
        if not value and not required:
            continue
        try:
            validate_field_path(value)
        except ValidationError as exc:
            errors[name] = exc.messages[0]
    return errors


@transaction.atomic
def email_code_setting_save(
    *,
    client: Client,
    tool_name: str,
    email_field: str,
    id_field: str = "",
    enabled: bool = True,
) -> EmailCodeSetting:
    """Create or update the client's setting (tenant import, admin). Raises ApplicationError
    naming the bad field."""
    errors = email_code_setting_errors(
        client=client, tool_name=tool_name, email_field=email_field, id_field=id_field
    )
    if errors:
        raise ApplicationError(
            "; ".join(f"{name}: {message}" for name, message in errors.items()),
            {"fields": errors},
            code="invalid",
        )
    values = {
        "tool_name": tool_name,
        "email_field": email_field,
        "id_field": id_field,
        "enabled": enabled,
    }
    setting = EmailCodeSetting.objects.for_client(client).select_for_update().first()
    if setting is None:
        return EmailCodeSetting.objects.create(client=client, **values)
    changed = [name for name, value in values.items() if getattr(setting, name) != value]
    for name in changed:
        setattr(setting, name, values[name])
    if changed:
        setting.save(update_fields=[*changed, "updated_at"])
    return setting


def email_code_setting_delete(*, client: Client) -> int:
    return EmailCodeSetting.objects.for_client(client).delete()[0]


# --------------------------------------------------------------------------------------------
# Sending a code
# --------------------------------------------------------------------------------------------


def _offer(status: str, challenge: EmailCodeChallenge | None = None, **values: Any) -> OtpOffer:
    return OtpOffer(status=status, message=offer_text(status, **values), challenge=challenge)


# What the customer is told when no code was sent, by why (any other status: unavailable).
_OFFER_FAILED_TEXTS = {
    OfferStatus.NOT_CONFIGURED: gettext_lazy(
        "I can't confirm who you are in this chat. Please sign in on our website, or "
        "contact us directly."
    ),
    OfferStatus.INVALID_PARAMS: gettext_lazy(
        "To send you a code I need the details that identify your order or account. "
        "Please check them and send them again."
    ),
    OfferStatus.NOT_FOUND: gettext_lazy(
        "I couldn't find an e-mail address on file for those details, so I can't send a "
        "code. Please check them, or contact us directly."
    ),
    OfferStatus.ADDRESS_LIMIT: gettext_lazy(
        "Several codes have already been sent to this address in the last hour. Please use "
        "the latest one, or try again later."
    ),
    OfferStatus.VISITOR_LIMIT: gettext_lazy(
        "You have asked for several codes in the last hour. Please use the latest one, or "
        "try again later."
    ),
}
_OFFER_UNAVAILABLE_TEXT = gettext_lazy(
    "I couldn't send a code right now. Please try again in a moment."
)


def offer_text(status: str, *, address: str = "") -> str:
    """The customer-facing words for an offer's outcome, in the active language."""
    minutes = int(CODE_TTL.total_seconds() // 60)
    if status == OfferStatus.SENT:
        return gettext(
            "I've sent a 6-digit code to %(address)s. Please type it here to confirm it's you — "
            "it works for %(minutes)d minutes."
        ) % {"address": mask_email(address), "minutes": minutes}
    return str(_OFFER_FAILED_TEXTS.get(status, _OFFER_UNAVAILABLE_TEXT))


def _visitor_sends(*, client: Client, conversation: Conversation, since: Any) -> int:
    same = Q(conversation=conversation)
    if conversation.visitor_id:
        same |= Q(visitor_id=conversation.visitor_id)
    return EmailCodeChallenge.objects.for_client(client).filter(same, created_at__gte=since).count()


def _address_sends(*, client: Client, email: str, since: Any) -> int:
    return (
        EmailCodeChallenge.objects.for_client(client)
        .filter(email__iexact=email, created_at__gte=since)
        .count()
    )


def otp_offer(*, client: Client, conversation: Conversation, params: dict[str, Any]) -> OtpOffer:
    """Send a verification code to the address on file for `params` (the details the customer
    gave, e.g. `{"order_id": "TH-12345"}`) and return what to tell the customer.

    Runs the client's configured read tool through `tool_execute` (so it must not be called
    inside `transaction.atomic()`), takes the address from its result, and sends a code to that
    address only. Never raises for an expected outcome (no setting, tool failure, no address,
    a limit reached): the status says which, the message tells the customer."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    with translation.override(_language(client, conversation)):
        return _otp_offer(client=client, conversation=conversation, params=params)


def _lookup_tool(*, client: Client, setting: EmailCodeSetting) -> ClientTool | None:
    """The enabled read tool the setting names, or None (logged: the set-up is broken)."""
    tool = (
        ClientTool.objects.for_client(client)
        .filter(name=setting.tool_name, enabled=True, kind=ToolKind.READ)
        .first()
    )
    if tool is None:
        logger.warning(
            "e-mail code: the lookup tool is missing, disabled or not a read tool",
            extra={"client": client.pk, "tool": setting.tool_name},
        )
    return tool


def _lookup_params(tool: ClientTool, params: Any) -> dict[str, Any] | str:
    """The details the lookup is called with, or the offer status that says why it cannot be."""
    if not isinstance(params, dict):
        return OfferStatus.INVALID_PARAMS
    # The details come from the call the customer asked for (a cancel's order id and reason):
    # the lookup takes only those its own schema names.
    named = tool.parameters.get("properties")
    if isinstance(named, dict):
        params = {k: v for k, v in params.items() if k in named}
    try:
        if not Draft202012Validator(tool.parameters).is_valid(params):
            return OfferStatus.INVALID_PARAMS
    except SchemaError:
        return OfferStatus.UNAVAILABLE
    return params


def _address_on_file(setting: EmailCodeSetting, execution: ToolExecution) -> tuple[str, str] | str:
    """(the e-mail address, the customer reference) the lookup found, or the offer status that
    says why there is no address to send to."""
    if execution.status != ExecutionStatus.SUCCEEDED:
        refused = execution.failure_kind == FailureKind.REFUSED  # e.g. "no such order"
        return OfferStatus.NOT_FOUND if refused else OfferStatus.UNAVAILABLE
    email = result_field(execution.result, setting.email_field)
    email = email.strip() if isinstance(email, str) else ""
    try:
        validate_email(email)
    except ValidationError:
        return OfferStatus.NOT_FOUND
    customer_ref = ""
    if setting.id_field:
        found = result_field(execution.result, setting.id_field)
        if isinstance(found, str | int) and not isinstance(found, bool):
            customer_ref = str(found).strip()[:255]
    return email, customer_ref


def _challenge_create(
    *,
    client: Client,
    conversation: Conversation,
    setting: EmailCodeSetting,
    tool: ClientTool,
    email: str,
    customer_ref: str,
    code: str,
) -> EmailCodeChallenge | str:
    """The new open challenge for `code` (replacing the conversation's open one), or the limit
    status when the visitor or the address has had enough codes this hour."""
    with transaction.atomic():
        # One offer of this client at a time from here to the insert: the limits are counted
        # and the new challenge written under the same lock, so two concurrent requests cannot
        # both slip under a limit.
        EmailCodeSetting.objects.for_client(client).select_for_update().filter(
            pk=setting.pk
        ).first()
        now = timezone.now()
        since = now - _HOUR
        limit_visitor = int(settings.EMAIL_CODES_PER_VISITOR_PER_HOUR)
        if _visitor_sends(client=client, conversation=conversation, since=since) >= limit_visitor:
            return OfferStatus.VISITOR_LIMIT
        limit_address = int(settings.EMAIL_CODES_PER_ADDRESS_PER_HOUR)
        if _address_sends(client=client, email=email, since=since) >= limit_address:
            return OfferStatus.ADDRESS_LIMIT
        EmailCodeChallenge.objects.for_client(client).filter(
            conversation=conversation, status=ChallengeStatus.OPEN
        ).update(status=ChallengeStatus.REPLACED, updated_at=now)
        public_id = uuid.uuid4()
        return EmailCodeChallenge.objects.create(
            client=client,
            public_id=public_id,
            conversation=conversation,
            visitor_id=conversation.visitor_id,
            email=email,
            customer_ref=customer_ref,
            tool_name=tool.name,
            code_hash=_code_hash(public_id, code),
            expires_at=now + CODE_TTL,
        )


def _otp_offer(*, client: Client, conversation: Conversation, params: dict[str, Any]) -> OtpOffer:
    setting = email_code_setting(client=client)
    if setting is None or not setting.enabled:
        return _offer(OfferStatus.NOT_CONFIGURED)
    tool = _lookup_tool(client=client, setting=setting)
    if tool is None:
        return _offer(OfferStatus.UNAVAILABLE)
    lookup_params = _lookup_params(tool, params)
    if isinstance(lookup_params, str):
        return _offer(lookup_params)
    since = timezone.now() - _HOUR
    limit_visitor = int(settings.EMAIL_CODES_PER_VISITOR_PER_HOUR)
    # Checked before the lookup too, so a visitor over the limit cannot use it to probe.
    if _visitor_sends(client=client, conversation=conversation, since=since) >= limit_visitor:
        return _offer(OfferStatus.VISITOR_LIMIT)

    execution = tool_execute(
        client=client,
        tool=tool,
        params=lookup_params,
        idempotency_key=f"email-code-{uuid.uuid4().hex}",
        conversation=conversation,
    )
    found = _address_on_file(setting, execution)
    if isinstance(found, str):
        return _offer(found)
    email, customer_ref = found

    code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
    challenge = _challenge_create(
        client=client,
        conversation=conversation,
        setting=setting,
        tool=tool,
        email=email,
        customer_ref=customer_ref,
        code=code,
    )
    if isinstance(challenge, str):
        return _offer(challenge)
    if not _send_code(client=client, email=email, code=code):
        EmailCodeChallenge.objects.for_client(client).filter(pk=challenge.pk).update(
            status=ChallengeStatus.UNSENT, updated_at=timezone.now()
        )
        challenge.status = ChallengeStatus.UNSENT
        return _offer(OfferStatus.UNAVAILABLE, challenge)
    return _offer(OfferStatus.SENT, challenge, address=email)


def _send_code(*, client: Client, email: str, code: str) -> bool:
    """E-mail the code in the active language (the conversation's). Never raises."""
    business = {"business": client.name}
    minutes = int(CODE_TTL.total_seconds() // 60)
    subject = gettext("%(business)s: your verification code") % business
    body = "\n".join(
        [
            gettext("Hello,"),
            "",
            gettext("Your code to confirm it's you in the chat with %(business)s:") % business,
            "",
            f"    {code}",
            "",
            gettext(
                "It works for %(minutes)d minutes. Type it in the chat only — we never ask for "
                "it anywhere else."
            )
            % {"minutes": minutes},
            gettext("If you did not ask for it, ignore this e-mail."),
        ]
    )
    try:
        EmailMessage(
            subject=subject, body=body, from_email=settings.DEFAULT_FROM_EMAIL, to=[email]
        ).send()
    except Exception:
        logger.exception("e-mail code could not be sent", extra={"client": client.pk})
        return False
    return True


# --------------------------------------------------------------------------------------------
# Checking a code
# --------------------------------------------------------------------------------------------


def otp_check_text(result: dict[str, Any]) -> str:
    """The reply to a typed code, in the active language, from what `otp_check` stored."""
    status = result.get("result")
    if status == CheckStatus.VERIFIED:
        return gettext("Thank you — you're verified as %(address)s.") % {
            "address": result.get("address", "")
        }
    if status == CheckStatus.WRONG:
        left = int(result.get("tries_left", 0))
        return ngettext(
            "That code isn't right. You have %(count)d more try.",
            "That code isn't right. You have %(count)d more tries.",
            left,
        ) % {"count": left}
    if status == CheckStatus.EXHAUSTED:
        return gettext(
            "That code isn't right, and that was the last try: the code no longer works. Ask me "
            "for a new one if you need it."
        )
    if status == CheckStatus.EXPIRED:
        return gettext(
            "That code has expired (a code works for %(minutes)d minutes). Ask me for a new one "
            "if you need it."
        ) % {"minutes": int(CODE_TTL.total_seconds() // 60)}
    if status == CheckStatus.NO_CODE:
        return gettext("There is no code waiting to be confirmed in this chat.")
    return gettext("I couldn't check the code right now. Please try again in a moment.")


def _checked(status: str, *, tries_left: int = 0, address: str = "") -> OtpCheck:
    data: dict[str, Any] = {"result": status}
    if status == CheckStatus.WRONG:
        data["tries_left"] = tries_left
    if address:
        data["address"] = mask_email(address)
    return OtpCheck(status=status, message=otp_check_text(data), tries_left=tries_left, data=data)


@transaction.atomic
def otp_check(*, client: Client, conversation: Conversation, code: str) -> OtpCheck:
    """Check a typed code against the conversation's open challenge. Correct, in time and
    within the tries: the conversation is verified for the challenge's address. Wrong: one try
    used; the fifth wrong one kills the challenge. Only this conversation's challenge (of this
    client) is ever compared."""
    if conversation.client_id != client.pk:
        raise ValueError("conversation belongs to another client")
    with translation.override(_language(client, conversation)):
        challenge = (
            EmailCodeChallenge.objects.for_client(client)
            .select_for_update()
            .filter(conversation=conversation, status=ChallengeStatus.OPEN)
            .order_by("-created_at", "-pk")
            .first()
        )
        if challenge is None:
            return _checked(CheckStatus.NO_CODE)
        now = timezone.now()
        if now >= challenge.expires_at:
            challenge.status = ChallengeStatus.EXPIRED
            challenge.save(update_fields=["status", "updated_at"])
            return _checked(CheckStatus.EXPIRED)
        typed = _ascii_digits(code or "")
        if hmac.compare_digest(_code_hash(challenge.public_id, typed), challenge.code_hash):
            challenge.status = ChallengeStatus.VERIFIED
            challenge.verified_at = now
            challenge.save(update_fields=["status", "verified_at", "updated_at"])
            values = {
                "customer_email": challenge.email,
                "customer_id": challenge.customer_ref or challenge.email,
                "customer_verified_via": CustomerVerification.EMAIL_CODE,
                "customer_verified_at": now,
            }
            Conversation.objects.for_client(client).filter(pk=conversation.pk).update(**values)
            for name, value in values.items():
                setattr(conversation, name, value)
            return _checked(CheckStatus.VERIFIED, address=challenge.email)
        challenge.attempts += 1
        if challenge.attempts >= MAX_WRONG_CODES:
            challenge.status = ChallengeStatus.EXHAUSTED
        challenge.save(update_fields=["attempts", "status", "updated_at"])
        if challenge.status == ChallengeStatus.EXHAUSTED:
            return _checked(CheckStatus.EXHAUSTED)
        return _checked(CheckStatus.WRONG, tries_left=MAX_WRONG_CODES - challenge.attempts)


def email_codes_purge() -> int:
    """Delete every client's challenges older than CHALLENGE_KEEP (the hourly task). Returns
    how many went."""
    cutoff = timezone.now() - CHALLENGE_KEEP
    deleted, _ = (
        EmailCodeChallenge.objects.unscoped("the hourly purge of old codes spans every client")
        .filter(created_at__lt=cutoff)
        .delete()
    )
    return deleted
