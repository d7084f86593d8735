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
    """A tool refused or failed; the message is safe to show the customer."""


BuiltinHandler = Callable[..., dict[str, Any]]

_STATUSES = ["processing", "shipped", "delivered", "shipped", "processing", "delivered"]
_CARRIERS = ["UPS", "USPS", "FedEx"]


def _order(client: Client, order_id: str) -> dict[str, Any]:
    from apps.tools.models import ExecutionStatus, ToolExecution

    digest = int(hashlib.sha256(order_id.encode()).hexdigest(), 16)
    if order_id.endswith("0000"):
        raise ToolError(f"We couldn't find order {order_id}. Please check the number.")
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
        raise ToolError(f"Order {order['order_id']} has already {order['status']}.")
    return {"order_id": order["order_id"], "shipping_address": params["address"], "updated": True}


def cancel_order(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    order = _order(client, params["order_id"])
    if order["status"] == "cancelled":
        raise ToolError(f"Order {order['order_id']} is already cancelled.")
    if order["status"] != "processing":
        raise ToolError(
            f"Order {order['order_id']} has already {order['status']} and can't be cancelled; "
            "you can return it within 60 days instead."
        )
    return {"order_id": order["order_id"], "status": "cancelled", "refund": order["total"]}


def request_refund(*, client: Client, params: dict[str, Any], **_: Any) -> dict[str, Any]:
    order = _order(client, params["order_id"])
    amount = params.get("amount") or order["total"]
    digest = int(hashlib.sha256(f"refund:{order['order_id']}".encode()).hexdigest(), 16)
    return {
        "order_id": order["order_id"],
        "refund_id": f"RF-{digest % 10**6:06d}",
        "amount": str(amount),
        "status": "submitted",
        "eta_days": 5,
    }


BUILTIN_HANDLERS: dict[str, BuiltinHandler] = {
    "demo.get_order_status": get_order_status,
    "demo.track_shipment": track_shipment,
    "demo.update_shipping_address": update_shipping_address,
    "demo.cancel_order": cancel_order,
    "demo.request_refund": request_refund,
}
