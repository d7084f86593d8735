"""The console's flag-and-teach actions on one conversation (static/console/flags.js; included
by the console's URLconf; docs/architecture.md, "Insights"): which replies can be flagged or
taught from and their flags, flag an assistant reply, propose a staff reply for review.

JSON in and out, for the page's script. Reading needs the viewer role; flagging and teaching
need the agent role. Every id is looked up within the selected client: another client's
conversation or message answers 404 like a missing one."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from apps.api.permissions import SUPPORT, role_permits
from apps.api.schema import parse_uuid
from apps.console.access import ConsoleAccess, json_error, json_view
from apps.conversations.models import Conversation, Message, Role, Visibility
from apps.conversations.selectors import conversation_get
from apps.core.exceptions import ApplicationError
from apps.flags.models import FlagReason, MessageFlag
from apps.flags.selectors import flag_list
from apps.insights.models import InsightProposal, ProposalKind
from apps.insights.teach import flag_and_teach, staff_reply_teach

TEACH_KINDS = {"", ProposalKind.NOTE, ProposalKind.FAQ, ProposalKind.ARTICLE}


def _message_or_none(access: ConsoleAccess, public_id: str, message_id: str) -> Message | None:
    conversation = conversation_get(client=access.client, public_id=public_id)
    if conversation is None:
        return None
    parsed = parse_uuid(message_id)
    if parsed is None:
        return None
    return (
        Message.objects.for_client(access.client)
        .select_related("conversation")
        .filter(conversation=conversation, public_id=parsed)
        .first()
    )


def _flag_json(access: ConsoleAccess, flag: MessageFlag) -> dict[str, Any]:
    return {
        "id": str(flag.public_id),
        "seq": flag.message.seq,
        "reason": flag.reason,
        "reason_label": flag.get_reason_display(),
        "correction": flag.correction,
        "flagged_by": flag.flagged_by.email if flag.flagged_by else None,
        "created_at": flag.created_at.isoformat(),
        "case_url": reverse("console-flag-simulation-case", args=[flag.public_id]) + access.query,
    }


def _proposal_json(proposal: InsightProposal | None) -> dict[str, Any] | None:
    if proposal is None:
        return None
    return {
        "id": str(proposal.public_id),
        "kind": proposal.kind,
        "kind_label": proposal.get_kind_display(),
        "title": proposal.title,
        # Where it is reviewed (the admin checks the role: viewers see it, admins decide).
        "review_url": reverse("admin:insights_insightproposal_change", args=[proposal.pk]),
    }


def _refused(access: ConsoleAccess) -> JsonResponse | None:
    if not role_permits(access.role, SUPPORT):
        return json_error(
            403, "permission_denied", _("This needs the %(role)s role.") % {"role": SUPPORT}
        )
    return None


def _message_to_flag(
    access: ConsoleAccess, public_id: str, message_id: str
) -> Message | JsonResponse:
    """The message a flag or teach request names, or the answer refusing the request (the
    role is too low; no such message in this client's conversation)."""
    refused = _refused(access)
    if refused is not None:
        return refused
    message = _message_or_none(access, public_id, message_id)
    if message is None:
        return json_error(404, "not_found", _("Not found."))
    return message


def _error(error: ApplicationError) -> JsonResponse:
    body: dict[str, Any] = {"error": {"code": error.code, "message": error.message}}
    if error.extra.get("fields"):
        body["error"]["fields"] = {k: str(v) for k, v in error.extra["fields"].items()}
    return JsonResponse(body, status=error.status)


def _teachable(conversation: Conversation, access: ConsoleAccess) -> list[dict[str, Any]]:
    rows = (
        Message.objects.for_client(access.client)
        .filter(
            conversation=conversation,
            visibility=Visibility.VISIBLE,
            role__in=[Role.ASSISTANT, Role.STAFF],
        )
        .order_by("seq")
        .values_list("seq", "public_id", "role")
    )
    return [{"seq": seq, "id": str(pid), "role": role} for seq, pid, role in rows]


@require_GET
@json_view
def conversation_flags(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    """The replies staff can flag (the assistant's) or teach from (staff's), and the flags."""
    conversation = conversation_get(client=access.client, public_id=public_id)
    if conversation is None:
        return json_error(404, "not_found", _("Not found."))
    flags = flag_list(client=access.client, conversation=conversation)
    return JsonResponse(
        {
            "can_act": role_permits(access.role, SUPPORT),
            "messages": _teachable(conversation, access),
            "flags": [_flag_json(access, f) for f in flags],
            "reasons": [{"value": v, "label": str(label)} for v, label in FlagReason.choices],
        }
    )


@require_POST
@json_view
def message_flag_view(
    request: HttpRequest, access: ConsoleAccess, public_id: str, message_id: str
) -> HttpResponse:
    message = _message_to_flag(access, public_id, message_id)
    if isinstance(message, JsonResponse):
        return message
    teach_as = request.POST.get("teach_as", "")
    if teach_as not in TEACH_KINDS:
        return json_error(400, "invalid", _("Choose note, faq or article."))
    try:
        flag, proposal = flag_and_teach(
            client=access.client,
            message=message,
            reason=request.POST.get("reason", ""),
            correction=request.POST.get("correction", ""),
            teach_as=teach_as,
            actor=request.user,
        )
    except ApplicationError as error:
        return _error(error)
    return JsonResponse(
        {"flag": _flag_json(access, flag), "proposal": _proposal_json(proposal)}, status=201
    )


@require_POST
@json_view
def message_teach_view(
    request: HttpRequest, access: ConsoleAccess, public_id: str, message_id: str
) -> HttpResponse:
    message = _message_to_flag(access, public_id, message_id)
    if isinstance(message, JsonResponse):
        return message
    teach_as = request.POST.get("teach_as") or ProposalKind.FAQ
    if teach_as not in TEACH_KINDS - {""}:
        return json_error(400, "invalid", _("Choose note, faq or article."))
    try:
        proposal = staff_reply_teach(client=access.client, message=message, teach_as=teach_as)
    except ApplicationError as error:
        return _error(error)
    return JsonResponse({"proposal": _proposal_json(proposal)}, status=201)
