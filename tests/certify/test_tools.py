"""The eight retail tools: what each does, and each rule that refuses (and then changes nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.certify.retail.tools import TOOLS, call
from apps.certify.retail.world import Order, User, World, generate


@pytest.fixture
def world() -> World:
    return generate(42)


def _orders(world: World, status: str) -> list[Order]:
    return [o for o in world.orders.values() if o.status == status]


def _other_variant(world: World, order: Order, *, price: str = "any", available: bool = True):
    """(old item id, new item id) for an item of `order` with another variant as asked."""
    for item in order.items:
        for variant in world.products[item.product_id].variants.values():
            if variant.item_id == item.item_id or variant.available != available:
                continue
            if price == "higher" and variant.price_cents <= item.price_cents:
                continue
            if price == "lower" and variant.price_cents >= item.price_cents:
                continue
            return item.item_id, variant.item_id
    raise LookupError("no such variant in this order")


def _find(world: World, status: str, *, price: str = "any", available: bool = True):
    """(order, old item id, new item id): the first order in `status` with such a variant."""
    for order in _orders(world, status):
        try:
            return (order, *_other_variant(world, order, price=price, available=available))
        except LookupError:
            continue
    raise LookupError(f"no {status} order with such a variant")


def _variant_price(world: World, item_id: str) -> int:
    found = world.variant(item_id)
    assert found is not None
    return found[1].price_cents


def _product_of(world: World, item_id: str) -> str:
    found = world.variant(item_id)
    assert found is not None
    return found[0].product_id


def _payer(world: World, order: Order) -> str:
    return order.payment_history[0].payment_method_id


def _swap_params(
    world: World, order: Order, old: str, new: str, *, payer: str | None = None
) -> dict[str, Any]:
    """Params that swap item `old` of `order` for variant `new` (modify or exchange), paid with
    `payer` or else the order's own payment method."""
    return {
        "order_id": order.order_id,
        "item_ids": [old],
        "new_item_ids": [new],
        "payment_method_id": payer or _payer(world, order),
    }


def _return_params(
    world: World, order: Order, item_ids: list[str], *, payer: str | None = None
) -> dict[str, Any]:
    """Params that return `item_ids` of `order` to `payer`, or else to the original method."""
    return {
        "order_id": order.order_id,
        "item_ids": item_ids,
        "payment_method_id": payer or _payer(world, order),
    }


def _refused(world: World, name: str, params: dict[str, Any], code: str) -> None:
    before = world.digest()
    reply = call(world, name, params)
    assert reply["ok"] is False, reply
    assert reply["code"] == code, reply
    assert reply["error"]
    assert world.digest() == before  # a refused call changes nothing


def test_there_are_eight_tools_with_object_schemas() -> None:
    assert sorted(TOOLS) == sorted(
        [
            "get_user_details",
            "get_order_details",
            "cancel_pending_order",
            "modify_pending_order_items",
            "return_delivered_order_items",
            "exchange_delivered_order_items",
            "modify_user_address",
            "transfer_to_human_agents",
        ]
    )
    destructive = {n for n, spec in TOOLS.items() if spec.destructive}
    assert destructive == {
        "cancel_pending_order",
        "modify_pending_order_items",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
    }
    for spec in TOOLS.values():
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False


# --- reads ----------------------------------------------------------------------------------------


def test_user_found_by_email_by_name_and_zip_and_by_id(world: World) -> None:
    user: User = next(iter(world.users.values()))
    by_email = call(world, "get_user_details", {"email": user.email.upper()})
    by_name = call(
        world,
        "get_user_details",
        {"first_name": user.first_name, "last_name": user.last_name, "zip": user.address.zip},
    )
    by_id = call(world, "get_user_details", {"user_id": user.user_id})
    assert by_email == by_name == by_id
    assert by_email["result"]["user_id"] == user.user_id
    assert by_email["result"]["orders"] == user.orders


def test_unknown_user_and_bad_lookups_are_refused(world: World) -> None:
    user = next(iter(world.users.values()))
    _refused(world, "get_user_details", {"email": "no-one@example.com"}, "user_not_found")
    _refused(
        world,
        "get_user_details",
        {"first_name": user.first_name, "last_name": user.last_name, "zip": "00000"},
        "user_not_found",
    )
    _refused(world, "get_user_details", {"first_name": user.first_name}, "invalid_params")
    _refused(world, "get_user_details", {"email": user.email, "extra": 1}, "invalid_params")


def test_order_details_show_items_variants_and_payments(world: World) -> None:
    order = _orders(world, "delivered")[0]
    result = call(world, "get_order_details", {"order_id": order.order_id})["result"]
    assert result["status"] == "delivered"
    assert [i["item_id"] for i in result["items"]] == [i.item_id for i in order.items]
    assert all(len(i["variants"]) >= 2 for i in result["items"])
    assert result["payment_history"][0]["payment_method_id"] == _payer(world, order)
    _refused(world, "get_order_details", {"order_id": "#W0000000"}, "order_not_found")
    _refused(world, "get_order_details", {"order_id": "W1"}, "invalid_params")


def test_unknown_tool_is_refused(world: World) -> None:
    _refused(world, "delete_everything", {}, "unknown_tool")


# --- cancel ---------------------------------------------------------------------------------------


def test_cancel_a_pending_order_refunds_it(world: World) -> None:
    order = _orders(world, "pending")[0]
    paid = order.payment_history[0]
    reply = call(
        world, "cancel_pending_order", {"order_id": order.order_id, "reason": "no longer needed"}
    )
    assert reply["ok"] is True
    assert order.status == "cancelled"
    assert order.cancel_reason == "no longer needed"
    assert order.payment_history[-1].transaction_type == "refund"
    assert order.payment_history[-1].amount_cents == paid.amount_cents
    assert order.payment_history[-1].payment_method_id == paid.payment_method_id


def test_cancel_to_a_gift_card_restores_its_balance(world: World) -> None:
    order = next(o for o in _orders(world, "pending") if _payer(world, o).startswith("gift_card"))
    card = world.users[order.user_id].payment_methods[_payer(world, order)]
    before = card.balance_cents
    call(
        world, "cancel_pending_order", {"order_id": order.order_id, "reason": "ordered by mistake"}
    )
    assert card.balance_cents == before + order.payment_history[0].amount_cents


@pytest.mark.parametrize("status", ["processed", "delivered", "cancelled"])
def test_only_a_pending_order_cancels(world: World, status: str) -> None:
    order = _orders(world, status)[0]
    params = {"order_id": order.order_id, "reason": "no longer needed"}
    _refused(world, "cancel_pending_order", params, "order_not_pending")


def test_cancel_needs_one_of_the_reasons(world: World) -> None:
    order = _orders(world, "pending")[0]
    params = {"order_id": order.order_id, "reason": "found it cheaper"}
    _refused(world, "cancel_pending_order", params, "invalid_params")


# --- modify items ---------------------------------------------------------------------------------


def test_modify_items_charges_the_difference_once(world: World) -> None:
    order, old, new = _find(world, "pending", price="higher")
    old_price = next(i.price_cents for i in order.items if i.item_id == old)
    new_price = _variant_price(world, new)
    params = _swap_params(world, order, old, new)
    reply = call(world, "modify_pending_order_items", params)
    assert reply["ok"] is True, reply
    assert order.status == "pending (item modified)"
    assert new in [i.item_id for i in order.items] and old not in [i.item_id for i in order.items]
    assert order.payment_history[-1].transaction_type == "payment"
    assert order.payment_history[-1].amount_cents == new_price - old_price
    # Once only: a modified order is neither modified nor cancelled again.
    _refused(world, "modify_pending_order_items", params, "order_not_pending")
    cancel = {"order_id": order.order_id, "reason": "no longer needed"}
    _refused(world, "cancel_pending_order", cancel, "order_not_pending")


def test_modify_items_refunds_a_cheaper_variant(world: World) -> None:
    order, old, new = _find(world, "pending", price="lower")
    params = _swap_params(world, order, old, new)
    reply = call(world, "modify_pending_order_items", params)
    assert reply["ok"] is True, reply
    assert reply["result"]["price_difference"].startswith("-")
    assert order.payment_history[-1].transaction_type == "refund"


def test_modify_items_refusals(world: World) -> None:
    order, old, new = _find(world, "pending")
    payer = _payer(world, order)
    base = {"order_id": order.order_id, "item_ids": [old], "new_item_ids": [new]}
    # Another product entirely.
    foreign = next(
        v.item_id
        for p in world.products.values()
        if p.product_id != _product_of(world, old)
        for v in p.variants.values()
        if v.available
    )
    _refused(
        world,
        "modify_pending_order_items",
        {**base, "new_item_ids": [foreign], "payment_method_id": payer},
        "different_product",
    )
    _refused(
        world,
        "modify_pending_order_items",
        {**base, "new_item_ids": [old], "payment_method_id": payer},
        "same_item",
    )
    _refused(
        world,
        "modify_pending_order_items",
        {**base, "item_ids": ["0000000000"], "payment_method_id": payer},
        "item_not_in_order",
    )
    _refused(
        world,
        "modify_pending_order_items",
        {**base, "new_item_ids": [new, new], "payment_method_id": payer},
        "item_count_mismatch",
    )
    # Somebody else's card.
    stranger = next(u for u in world.users.values() if u.user_id != order.user_id)
    _refused(
        world,
        "modify_pending_order_items",
        {**base, "payment_method_id": next(iter(stranger.payment_methods))},
        "payment_method_not_found",
    )
    # A delivered order is not modified.
    delivered, d_old, d_new = _find(world, "delivered")
    params = _swap_params(world, delivered, d_old, d_new)
    _refused(world, "modify_pending_order_items", params, "order_not_pending")


def test_modify_items_refuses_an_out_of_stock_variant(world: World) -> None:
    order, old, new = _find(world, "pending", available=False)
    params = _swap_params(world, order, old, new)
    _refused(world, "modify_pending_order_items", params, "item_unavailable")


def test_a_gift_card_pays_only_up_to_its_balance(world: World) -> None:
    for order in _orders(world, "pending"):
        user = world.users[order.user_id]
        cards = [m for m in user.payment_methods.values() if m.source == "gift_card"]
        if not cards:
            continue
        try:
            old, new = _other_variant(world, order, price="higher")
        except LookupError:
            continue
        card = cards[0]
        difference = _variant_price(world, new) - next(
            i.price_cents for i in order.items if i.item_id == old
        )
        params = _swap_params(world, order, old, new, payer=card.payment_method_id)
        card.balance_cents = difference - 1
        _refused(world, "modify_pending_order_items", params, "insufficient_gift_card_balance")
        card.balance_cents = difference
        assert call(world, "modify_pending_order_items", params)["ok"] is True
        assert card.balance_cents == 0
        return
    pytest.fail("no pending order of a gift card holder with a dearer variant")


# --- return ---------------------------------------------------------------------------------------


def test_partial_return_to_the_original_payment_method(world: World) -> None:
    order = next(o for o in _orders(world, "delivered") if len(o.items) >= 2)
    item = order.items[0]
    params = _return_params(world, order, [item.item_id])
    reply = call(world, "return_delivered_order_items", params)
    assert reply["ok"] is True
    assert (
        reply["result"]["refund_amount"]
        == f"{item.price_cents // 100}.{item.price_cents % 100:02d}"
    )
    assert order.status == "return requested"
    assert order.return_items == [item.item_id]
    # Asked again: it is no longer a delivered order.
    _refused(world, "return_delivered_order_items", params, "order_not_delivered")


def test_return_refund_goes_to_the_original_method_or_a_gift_card(world: World) -> None:
    for order in _orders(world, "delivered"):
        user = world.users[order.user_id]
        others = [
            m
            for m in user.payment_methods.values()
            if m.source != "gift_card" and m.payment_method_id != _payer(world, order)
        ]
        if others:
            break
    params = _return_params(
        world, order, [order.items[0].item_id], payer=others[0].payment_method_id
    )
    _refused(world, "return_delivered_order_items", params, "refund_method_not_allowed")


@pytest.mark.parametrize("status", ["pending", "processed", "cancelled"])
def test_only_a_delivered_order_is_returned(world: World, status: str) -> None:
    order = _orders(world, status)[0]
    params = _return_params(world, order, [order.items[0].item_id])
    _refused(world, "return_delivered_order_items", params, "order_not_delivered")


# --- exchange -------------------------------------------------------------------------------------


def test_exchange_records_the_price_difference_and_who_pays(world: World) -> None:
    order, old, new = _find(world, "delivered", price="higher")
    difference = _variant_price(world, new) - next(
        i.price_cents for i in order.items if i.item_id == old
    )
    params = _swap_params(world, order, old, new)
    reply = call(world, "exchange_delivered_order_items", params)
    assert reply["ok"] is True, reply
    assert order.status == "exchange requested"
    assert order.exchange_items == [old] and order.exchange_new_items == [new]
    assert order.exchange_price_difference_cents == difference > 0
    assert order.exchange_payment_method_id == _payer(world, order)
    _refused(world, "exchange_delivered_order_items", params, "order_not_delivered")


def test_exchange_refusals(world: World) -> None:
    pending, old, new = _find(world, "pending")
    params = _swap_params(world, pending, old, new)
    _refused(world, "exchange_delivered_order_items", params, "order_not_delivered")
    delivered, d_old, _ = _find(world, "delivered")
    params = _swap_params(world, delivered, d_old, "9999999999")
    _refused(world, "exchange_delivered_order_items", params, "item_not_found")


# --- address and transfer -------------------------------------------------------------------------


def test_modify_user_address(world: World) -> None:
    user = next(iter(world.users.values()))
    address = {
        "address1": "12 New Road",
        "address2": "",
        "city": "Boise",
        "state": "ID",
        "country": "USA",
        "zip": "83702",
    }
    reply = call(world, "modify_user_address", {"user_id": user.user_id, **address})
    assert reply["ok"] is True
    assert user.address.city == "Boise" and user.address.zip == "83702"
    _refused(world, "modify_user_address", {"user_id": "nobody", **address}, "user_not_found")
    _refused(
        world,
        "modify_user_address",
        {"user_id": user.user_id, **address, "zip": "ABCDE"},
        "invalid_params",
    )


def test_transfer_to_human_agents_is_recorded(world: World) -> None:
    before = world.digest()
    reply = call(world, "transfer_to_human_agents", {"summary": "Wants compensation."})
    assert reply == {"ok": True, "result": {"transferred": True}}
    assert world.transfers == ["Wants compensation."]
    assert world.digest() != before
    _refused(world, "transfer_to_human_agents", {"summary": ""}, "invalid_params")
