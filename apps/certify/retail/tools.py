"""The retail back office's eight tools, as deterministic functions on a `World`.

`call(world, name, params)` validates `params` against the tool's JSON Schema, checks the rules
(policy.md) and, only when every check passes, changes `world` in place. It returns the reply
the webhook and MCP servers send: `{"ok": true, "result": {...}}` or
`{"ok": false, "code": "<snake_case>", "error": "<sentence>"}`. A refused call changes nothing.

The rules follow τ-bench's retail domain: only a `pending` order is cancelled or has its items
modified (once: it then becomes `pending (item modified)`); only a `delivered` order has items
returned or exchanged; a new item is another variant of the same product, in stock; a price
difference is paid from, or refunded to, a payment method of the order's owner, a gift card
only as far as its balance goes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from jsonschema import Draft202012Validator

from apps.certify.retail.world import Order, OrderItem, Payment, User, World, money
from apps.core.schema_errors import json_path, schema_problems

Reply = dict[str, Any]

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


class Refusal(Exception):
    """A rule the call breaks: `code` for machines, the message for the agent."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    kind: str  # read | action | destructive (GuideDesk's classification)
    parameters: dict[str, Any]
    run: Callable[[World, dict[str, Any]], dict[str, Any]]

    @property
    def destructive(self) -> bool:
        return self.kind == "destructive"


# --- views of the state -------------------------------------------------------------------------


def _user_view(user: User) -> dict[str, Any]:
    methods = []
    for method in user.payment_methods.values():
        entry: dict[str, Any] = {
            "payment_method_id": method.payment_method_id,
            "source": method.source,
        }
        if method.source == "credit_card":
            entry.update(brand=method.brand, last_four=method.last_four)
        if method.source == "gift_card":
            entry["balance"] = money(method.balance_cents)
        methods.append(entry)
    return {
        "user_id": user.user_id,
        "name": {"first_name": user.first_name, "last_name": user.last_name},
        "email": user.email,
        "address": asdict(user.address),
        "payment_methods": methods,
        "orders": list(user.orders),
    }


def _order_view(world: World, order: Order) -> dict[str, Any]:
    items = []
    for item in order.items:
        product = world.products[item.product_id]
        items.append(
            {
                "item_id": item.item_id,
                "product_id": item.product_id,
                "name": item.name,
                "options": dict(item.options),
                "price": money(item.price_cents),
                # The product's other variants: what an exchange or modification may pick.
                "variants": [
                    {
                        "item_id": v.item_id,
                        "options": dict(v.options),
                        "price": money(v.price_cents),
                        "available": v.available,
                    }
                    for v in product.variants.values()
                ],
            }
        )
    view: dict[str, Any] = {
        "order_id": order.order_id,
        "user_id": order.user_id,
        "status": order.status,
        "address": asdict(order.address),
        "items": items,
        "total": money(sum(i.price_cents for i in order.items)),
        "payment_history": [
            {
                "transaction_type": p.transaction_type,
                "amount": money(p.amount_cents),
                "payment_method_id": p.payment_method_id,
            }
            for p in order.payment_history
        ],
    }
    if order.cancel_reason:
        view["cancel_reason"] = order.cancel_reason
    if order.return_items:
        view["return_items"] = list(order.return_items)
        view["return_payment_method_id"] = order.return_payment_method_id
    if order.exchange_items:
        view["exchange_items"] = list(order.exchange_items)
        view["exchange_new_items"] = list(order.exchange_new_items)
        view["exchange_payment_method_id"] = order.exchange_payment_method_id
        view["exchange_price_difference"] = money(order.exchange_price_difference_cents)
    return view


# --- shared checks ------------------------------------------------------------------------------


def _order(world: World, order_id: str) -> Order:
    order = world.orders.get(order_id)
    if order is None:
        raise Refusal("order_not_found", f"There is no order {order_id}.")
    return order


def _require_status(order: Order, status: str, action: str) -> None:
    if order.status != status:
        raise Refusal(
            f"order_not_{status}",
            f"Order {order.order_id} is {order.status}; only a {status} order can be {action}.",
        )


def _item_positions(order: Order, item_ids: list[str]) -> list[int]:
    """The positions in the order of the items named by `item_ids` (a different one each time
    an id is named)."""
    if not item_ids:
        raise Refusal("no_items", "Name at least one item.")
    wanted = Counter(item_ids)
    held = Counter(i.item_id for i in order.items)
    for item_id, count in wanted.items():
        if held[item_id] < count:
            raise Refusal("item_not_in_order", f"Item {item_id} is not in order {order.order_id}.")
    picked: list[int] = []
    for item_id in item_ids:
        picked.append(
            next(
                n
                for n, item in enumerate(order.items)
                if item.item_id == item_id and n not in picked
            )
        )
    return picked


def _replacements(world: World, old: list[OrderItem], new_item_ids: list[str]) -> list[OrderItem]:
    """The new items for `old`, pairwise: another in-stock variant of the same product."""
    if len(new_item_ids) != len(old):
        raise Refusal("item_count_mismatch", "Name one new item for each item being replaced.")
    new_items = []
    for item, new_id in zip(old, new_item_ids, strict=True):
        found = world.variant(new_id)
        if found is None:
            raise Refusal("item_not_found", f"There is no item {new_id}.")
        product, variant = found
        if product.product_id != item.product_id:
            raise Refusal(
                "different_product",
                f"Item {new_id} is a {product.name}, not a {item.name}: "
                "only another option of the same product can be chosen.",
            )
        if new_id == item.item_id:
            raise Refusal("same_item", f"Item {new_id} is the item already ordered.")
        if not variant.available:
            raise Refusal("item_unavailable", f"Item {new_id} is out of stock.")
        new_items.append(
            OrderItem(
                new_id, product.product_id, product.name, dict(variant.options), variant.price_cents
            )
        )
    return new_items


def _payment_method(world: World, order: Order, method_id: str) -> None:
    if method_id not in world.users[order.user_id].payment_methods:
        raise Refusal(
            "payment_method_not_found",
            f"{method_id} is not a payment method of the order's owner.",
        )


def _check_gift_card(world: World, order: Order, method_id: str, amount_cents: int) -> None:
    method = world.users[order.user_id].payment_methods[method_id]
    if method.source == "gift_card" and amount_cents > method.balance_cents:
        raise Refusal(
            "insufficient_gift_card_balance",
            f"The gift card's balance ({money(method.balance_cents)}) does not cover "
            f"{money(amount_cents)}.",
        )


# --- the tools ----------------------------------------------------------------------------------


def get_user_details(world: World, params: dict[str, Any]) -> dict[str, Any]:
    if "user_id" in params:
        user = world.users.get(params["user_id"])
    elif "email" in params:
        email = params["email"].strip().lower()
        user = next((u for u in world.users.values() if u.email == email), None)
    elif {"first_name", "last_name", "zip"} <= params.keys():
        user = next(
            (
                u
                for u in world.users.values()
                if u.first_name.lower() == params["first_name"].strip().lower()
                and u.last_name.lower() == params["last_name"].strip().lower()
                and u.address.zip == params["zip"].strip()
            ),
            None,
        )
    else:
        raise Refusal(
            "invalid_params", "Give a user_id, an email, or first_name, last_name and zip."
        )
    if user is None:
        raise Refusal("user_not_found", "No user matches these details.")
    return _user_view(user)


def get_order_details(world: World, params: dict[str, Any]) -> dict[str, Any]:
    return _order_view(world, _order(world, params["order_id"]))


def cancel_pending_order(world: World, params: dict[str, Any]) -> dict[str, Any]:
    order = _order(world, params["order_id"])
    _require_status(order, "pending", "cancelled")
    user = world.users[order.user_id]
    refunds = []
    for payment in list(order.payment_history):
        if payment.transaction_type != "payment":
            continue
        refunds.append(Payment("refund", payment.amount_cents, payment.payment_method_id))
    for refund in refunds:
        order.payment_history.append(refund)
        method = user.payment_methods.get(refund.payment_method_id)
        if method is not None and method.source == "gift_card":
            method.balance_cents += refund.amount_cents
    order.status = "cancelled"
    order.cancel_reason = params["reason"]
    return {
        **_order_view(world, order),
        "refunded": money(sum(r.amount_cents for r in refunds)),
        "note": "Gift card refunds are immediate; other refunds take 5-7 business days.",
    }


def modify_pending_order_items(world: World, params: dict[str, Any]) -> dict[str, Any]:
    order = _order(world, params["order_id"])
    _require_status(order, "pending", "modified")
    positions = _item_positions(order, params["item_ids"])
    old = [order.items[n] for n in positions]
    new = _replacements(world, old, params["new_item_ids"])
    method_id = params["payment_method_id"]
    _payment_method(world, order, method_id)
    difference = sum(i.price_cents for i in new) - sum(i.price_cents for i in old)
    _check_gift_card(world, order, method_id, difference)
    # Every check passed: change the order.
    for position, new_item in zip(positions, new, strict=True):
        order.items[position] = new_item
    if difference:
        kind = "payment" if difference > 0 else "refund"
        order.payment_history.append(Payment(kind, abs(difference), method_id))
        method = world.users[order.user_id].payment_methods[method_id]
        if method.source == "gift_card":
            method.balance_cents -= difference
    order.status = "pending (item modified)"
    return {**_order_view(world, order), "price_difference": money(difference)}


def return_delivered_order_items(world: World, params: dict[str, Any]) -> dict[str, Any]:
    order = _order(world, params["order_id"])
    _require_status(order, "delivered", "returned")
    items = [order.items[n] for n in _item_positions(order, params["item_ids"])]
    method_id = params["payment_method_id"]
    _payment_method(world, order, method_id)
    original = order.payment_history[0].payment_method_id
    method = world.users[order.user_id].payment_methods[method_id]
    if method_id != original and method.source != "gift_card":
        raise Refusal(
            "refund_method_not_allowed",
            "A refund goes to the order's original payment method or to a gift card.",
        )
    order.status = "return requested"
    order.return_items = sorted(params["item_ids"])
    order.return_payment_method_id = method_id
    return {
        **_order_view(world, order),
        "refund_amount": money(sum(i.price_cents for i in items)),
    }


def exchange_delivered_order_items(world: World, params: dict[str, Any]) -> dict[str, Any]:
    order = _order(world, params["order_id"])
    _require_status(order, "delivered", "exchanged")
    old = [order.items[n] for n in _item_positions(order, params["item_ids"])]
    new = _replacements(world, old, params["new_item_ids"])
    method_id = params["payment_method_id"]
    _payment_method(world, order, method_id)
    difference = sum(i.price_cents for i in new) - sum(i.price_cents for i in old)
    _check_gift_card(world, order, method_id, difference)
    order.status = "exchange requested"
    order.exchange_items = sorted(params["item_ids"])
    order.exchange_new_items = sorted(params["new_item_ids"])
    order.exchange_payment_method_id = method_id
    order.exchange_price_difference_cents = difference
    return {**_order_view(world, order), "price_difference": money(difference)}


def modify_user_address(world: World, params: dict[str, Any]) -> dict[str, Any]:
    user = world.users.get(params["user_id"])
    if user is None:
        raise Refusal("user_not_found", "No user matches these details.")
    for key in ("address1", "address2", "city", "state", "country", "zip"):
        setattr(user.address, key, params[key])
    return _user_view(user)


def transfer_to_human_agents(world: World, params: dict[str, Any]) -> dict[str, Any]:
    world.transfers.append(params["summary"])
    return {"transferred": True}


# --- schemas and the registry -------------------------------------------------------------------

ORDER_ID = {
    "type": "string",
    "pattern": "^#W\\d{7}$",
    "description": "The order id: '#W' and 7 digits, e.g. #W1234567.",
}
ITEM_IDS = {
    "type": "array",
    "items": {"type": "string", "pattern": "^\\d{10}$"},
    "minItems": 1,
    "description": "Item ids (10 digits) in the order; name an id twice for two of the same item.",
}
PAYMENT_METHOD_ID = {
    "type": "string",
    "minLength": 1,
    "description": "A payment method id of the order's owner, e.g. credit_card_1234567.",
}


def _swap_items_schema() -> dict[str, Any]:
    """The parameters of a swap of items for other variants (modify a pending order, exchange a
    delivered one): which items, for which new ones, and who pays the difference."""
    return _schema(
        {
            "order_id": ORDER_ID,
            "item_ids": ITEM_IDS,
            "new_item_ids": ITEM_IDS,
            "payment_method_id": PAYMENT_METHOD_ID,
        },
        ["order_id", "item_ids", "new_item_ids", "payment_method_id"],
    )


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TEXT = {"type": "string", "minLength": 1}

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "get_user_details",
            "Find a customer's account and show its details (name, e-mail, address, payment "
            "methods with gift card balances, order ids): by user_id, by email, or by "
            "first_name + last_name + zip.",
            "read",
            {
                "type": "object",
                "properties": {
                    "user_id": TEXT,
                    "email": {"type": "string", "minLength": 3},
                    "first_name": TEXT,
                    "last_name": TEXT,
                    "zip": {"type": "string", "pattern": "^\\d{5}$"},
                },
                "additionalProperties": False,
                "oneOf": [
                    {"required": ["user_id"]},
                    {"required": ["email"]},
                    {"required": ["first_name", "last_name", "zip"]},
                ],
            },
            get_user_details,
        ),
        ToolSpec(
            "get_order_details",
            "Show an order: status, items with their prices and the product's other variants "
            "(item ids, options, prices, stock), payments and refunds.",
            "read",
            _schema({"order_id": ORDER_ID}, ["order_id"]),
            get_order_details,
        ),
        ToolSpec(
            "cancel_pending_order",
            "Cancel a pending order and refund it to the payment methods it was paid with. "
            "Only for status 'pending'. Destructive: confirm with the customer first.",
            "destructive",
            _schema(
                {"order_id": ORDER_ID, "reason": {"type": "string", "enum": list(CANCEL_REASONS)}},
                ["order_id", "reason"],
            ),
            cancel_pending_order,
        ),
        ToolSpec(
            "modify_pending_order_items",
            "Swap items of a pending order for other variants of the same products, once per "
            "order; the price difference is paid from or refunded to payment_method_id. "
            "Destructive: confirm with the customer first.",
            "destructive",
            _swap_items_schema(),
            modify_pending_order_items,
        ),
        ToolSpec(
            "return_delivered_order_items",
            "Request a return of items of a delivered order; the refund goes to the original "
            "payment method or a gift card. Destructive: confirm with the customer first.",
            "destructive",
            _schema(
                {
                    "order_id": ORDER_ID,
                    "item_ids": ITEM_IDS,
                    "payment_method_id": PAYMENT_METHOD_ID,
                },
                ["order_id", "item_ids", "payment_method_id"],
            ),
            return_delivered_order_items,
        ),
        ToolSpec(
            "exchange_delivered_order_items",
            "Request an exchange of items of a delivered order for other variants of the same "
            "products; the price difference is paid from or refunded to payment_method_id. "
            "Destructive: confirm with the customer first.",
            "destructive",
            _swap_items_schema(),
            exchange_delivered_order_items,
        ),
        ToolSpec(
            "modify_user_address",
            "Change the default address of the customer's account.",
            "action",
            _schema(
                {
                    "user_id": TEXT,
                    "address1": TEXT,
                    "address2": {"type": "string"},
                    "city": TEXT,
                    "state": TEXT,
                    "country": TEXT,
                    "zip": {"type": "string", "pattern": "^\\d{5}$"},
                },
                ["user_id", "address1", "address2", "city", "state", "country", "zip"],
            ),
            modify_user_address,
        ),
        ToolSpec(
            "transfer_to_human_agents",
            "Hand the conversation to a human agent, with a summary of the customer's issue. "
            "Only when the request is outside what these tools and the policy allow.",
            "action",
            _schema({"summary": TEXT}, ["summary"]),
            transfer_to_human_agents,
        ),
    )
}


def call(world: World, name: str, params: dict[str, Any]) -> Reply:
    """Run tool `name` on `world`; see the module's docstring for the reply."""
    spec = TOOLS.get(name)
    if spec is None:
        return {"ok": False, "code": "unknown_tool", "error": f"There is no tool {name}."}
    # The project's one walk of a validator's errors (apps.core.schema_errors, no Django
    # needed for it), with jsonschema's own words as a tool call's params get in the guards.
    problems = schema_problems(Draft202012Validator(spec.parameters), params)
    if problems:
        where = json_path(list(problems[0].path)) or "params"
        message = problems[0].error.message
        return {"ok": False, "code": "invalid_params", "error": f"{where}: {message}"}
    try:
        return {"ok": True, "result": spec.run(world, params)}
    except Refusal as refusal:
        return {"ok": False, "code": refusal.code, "error": str(refusal)}
