"""Tools that run inside GuideDesk. The `demo.*` handlers back the demo shop (Trailhead
Outfitters): a deterministic order book derived from the order number, plus whatever earlier tool
runs changed (a cancelled order stays cancelled)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from apps.clients.models import Client


class ToolError(Exception):
    """A tool refused or failed; the message is safe to show the customer. `code` (one of
    apps.tools.wording.ERROR_CODES) has the customer told in their own language."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


BuiltinHandler = Callable[..., dict[str, Any]]

_STATUSES = ["processing", "shipped", "delivered", "shipped", "processing", "delivered"]
_CARRIERS = ["UPS", "USPS", "FedEx"]


def _order(client: Client, order_id: str) -> dict[str, Any]:
    from apps.tools.models import ExecutionStatus, ToolExecution

    digest = int(hashlib.sha256(order_id.encode()).hexdigest(), 16)
    if order_id.endswith("0000"):
        raise ToolError(
            f"We couldn't find order {order_id}. Please check the number.", code="not_found"
        )
    status = _STATUSES[digest % len(_STATUSES)]
    placed = date(2026, 11, 1) + timedelta(days=digest % 18)
    order: dict[str, Any] = {
        "order_id": order_id,
        "status": status,
        "placed_on": placed.isoformat(),
        "total": f"{49 + digest % 400}.{digest % 100:02d}",
        "currency": "USD",
        "items": 1 + digest % 4,
    }
    done = ToolExecution.objects.for_client(client).filter(
        status=ExecutionStatus.SUCCEEDED,
        params__order_id=order_id,
        tool__builtin_handler__in=["demo.cancel_order", "demo.update_shipping_address"],
    )
    for execution in done.select_related("tool").order_by("created_at"):
        if execution.tool.builtin_handler == "demo.cancel_order":
            order["status"] = "cancelled"
        else:
            order["shipping_address"] = execution.params.get("address")
    return order


# How an order that is past the point of an action is described, and its refusal code.
_PAST = {
    "shipped": ("has already shipped", "already_shipped"),
    "delivered": ("has already been delivered", "already_delivered"),
    "cancelled": ("has already been cancelled", "already_cancelled"),
}


def _too_late(order: dict[str, Any], consequence: str) -> ToolError:
    """'Order TH-12346 has already been delivered. It can't be cancelled.'"""
    state, code = _PAST.get(order["status"], (f"is {order['status']}", "not_allowed"))
    return ToolError(f"Order {order['order_id']} {state}. {consequence}.", code=code)


def get_order_status(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    return _order(client, params["order_id"])


def track_shipment(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    order = _order(client, params["order_id"])
    if order["status"] not in {"shipped", "delivered"}:
        return {"order_id": order["order_id"], "status": order["status"], "tracking": None}
    digest = int(hashlib.sha256(order["order_id"].encode()).hexdigest(), 16)
    return {
        "order_id": order["order_id"],
        "status": order["status"],
        "carrier": _CARRIERS[digest % 3],
        "tracking_number": f"1Z{digest % 10**12:012d}",
    }


def update_shipping_address(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    order = _order(client, params["order_id"])
    if order["status"] != "processing":
        raise _too_late(order, "The address can't be changed")
    return {"order_id": order["order_id"], "shipping_address": params["address"], "updated": True}


def cancel_order(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    order = _order(client, params["order_id"])
    if order["status"] == "cancelled":
        raise ToolError(
            f"Order {order['order_id']} has already been cancelled.", code="already_cancelled"
        )
    if order["status"] != "processing":
        raise _too_late(order, "It can't be cancelled, but you can return it within 60 days")
    return {
        "order_id": order["order_id"],
        "status": "cancelled",
        "refund": order["total"],
        "currency": order["currency"],
    }


def request_refund(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    order = _order(client, params["order_id"])
    amount = params.get("amount") or order["total"]
    digest = int(hashlib.sha256(f"refund:{order['order_id']}".encode()).hexdigest(), 16)
    return {
        "order_id": order["order_id"],
        "refund_id": f"RF-{digest % 10**6:06d}",
        "amount": str(amount),
        "currency": order["currency"],
        "status": "submitted",
        "eta_days": 5,
    }


# --------------------------------------------------------------------------------------------
# Cross-session notes (apps.notes): the model searches them and proposes new ones. Declared per
# client like any tool (kind read / action, the parameter schemas below — docs/tenant-import.md),
# so the same guards apply: enabled set, JSON Schema, critique for the action.
# --------------------------------------------------------------------------------------------

SEARCH_NOTES_MAX_RESULTS = 10

SEARCH_NOTES_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "description": "Words to look for in earlier notes.",
        },
        "type": {
            "type": "string",
            "enum": ["success", "failure", "pattern", "strategy", "tip"],
            "description": "Only notes of this type.",
        },
        "language": {
            "type": "string",
            "maxLength": 16,
            "description": "Only notes in this language code ('' = notes for any language).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

ADD_NOTE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {
            "type": "string",
            "enum": ["success", "failure", "pattern", "strategy", "tip"],
            "description": "What kind of note: an outcome (success, failure) or a lesson "
            "(pattern, strategy, tip). Every note waits for staff approval before it is used.",
        },
        "content": {
            "type": "string",
            "minLength": 1,
            "maxLength": 500,
            "description": "The note, one or two sentences, without the customer's words or "
            "personal data (links and identifiers are masked).",
        },
        "ref": {
            "type": "string",
            "maxLength": 200,
            "description": "What it is about: a tool name or a topic (no order numbers).",
        },
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["type", "content"],
    "additionalProperties": False,
}


def _notes_on(client: Client) -> None:
    if not client.plan.notes_enabled:
        raise ToolError("Notes are switched off for this assistant.")


def search_notes(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    """The client's active notes matching the query, best first (never pending or archived),
    their text masked as in the prompt block (links and personal data: apps/notes/redaction.py)."""
    from apps.notes.models import NoteStatus
    from apps.notes.redaction import inert_line
    from apps.notes.selectors import PROMPT_LINE_MAX_CHARS, notes_search, relative_age

    _notes_on(client)
    found = notes_search(
        client=client,
        query=params["query"],
        type=params.get("type") or None,
        language=params.get("language"),
        status=NoteStatus.ACTIVE,
    )[:SEARCH_NOTES_MAX_RESULTS]
    notes = [
        {
            "type": note.type,
            "content": inert_line(note.content, limit=PROMPT_LINE_MAX_CHARS),
            "ref": inert_line(note.ref, limit=60),
            "confidence": note.confidence,
            "language": note.language,
            "age": relative_age(note.created_at),
        }
        for note in found
    ]
    return {"query": params["query"], "count": len(notes), "notes": notes}


def add_note(
    *, client: Client, params: dict[str, Any], conversation_id: int | None = None, **_: Any
) -> dict[str, Any]:
    """Save a note from the model. Whatever its type, it waits for staff approval
    (`pending_review`, `apps.notes.services.default_status`) and its text is masked."""
    from apps.conversations.models import Conversation
    from apps.core.exceptions import ApplicationError
    from apps.notes.models import NoteSource, NoteStatus
    from apps.notes.services import note_add

    _notes_on(client)
    conversation = (
        Conversation.objects.for_client(client).filter(pk=conversation_id).first()
        if conversation_id
        else None
    )
    try:
        note = note_add(
            client=client,
            type=params["type"],
            content=params["content"],
            ref=params.get("ref") or "",
            confidence=params.get("confidence"),
            language=conversation.language if conversation else "",
            source=NoteSource.AI,
            conversation=conversation,
        )
    except ApplicationError as exc:
        fields = exc.extra.get("fields", {})
        raise ToolError(
            "; ".join(f"{name}: {why}" for name, why in fields.items()) or exc.message
        ) from exc
    pending = note.status == NoteStatus.PENDING_REVIEW
    return {
        "note_id": note.pk,
        "status": note.status,
        "saved": "waiting for staff approval before it is used" if pending else "in use",
    }


BUILTIN_HANDLERS: dict[str, BuiltinHandler] = {
    "demo.get_order_status": get_order_status,
    "demo.track_shipment": track_shipment,
    "demo.update_shipping_address": update_shipping_address,
    "demo.cancel_order": cancel_order,
    "demo.request_refund": request_refund,
    "notes.search_notes": search_notes,
    "notes.add_note": add_note,
}
