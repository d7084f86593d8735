"""The retail world: the same seed gives the same world, JSON keeps it, the digest sees state."""

from apps.certify.retail import world as retail
from apps.certify.retail.world import generate


def test_same_seed_same_world_and_digest() -> None:
    first, second = generate(42), generate(42)
    assert first.to_json() == second.to_json()
    assert first.digest() == second.digest()


def test_another_seed_another_world() -> None:
    assert generate(42).digest() != generate(43).digest()


def test_json_round_trip_keeps_the_digest() -> None:
    world = generate(7)
    again = retail.from_json(world.to_json())
    assert again.to_json() == world.to_json()
    assert again.digest() == world.digest()


def test_the_world_has_what_the_tasks_need() -> None:
    world = generate(42)
    assert len(world.users) == retail.USER_COUNT
    for user in world.users.values():
        statuses = {world.orders[o].status for o in user.orders}
        assert {"pending", "delivered"} <= statuses
        assert any(m.source in {"credit_card", "paypal"} for m in user.payment_methods.values())
    emails = [u.email for u in world.users.values()]
    assert len(set(emails)) == len(emails)
    # Products have several variants with different prices, some out of stock.
    for product in world.products.values():
        prices = {v.price_cents for v in product.variants.values()}
        assert len(product.variants) >= 2
        assert len(prices) >= 2
    assert any(not v.available for p in world.products.values() for v in p.variants.values())


def test_the_digest_sees_a_change_but_not_a_transfer_summarys_wording() -> None:
    world = generate(42)
    before = world.digest()
    order = next(iter(world.orders.values()))
    order.status = "cancelled"
    assert world.digest() != before

    one, other = generate(42), generate(42)
    one.transfers.append("Customer wants a refund for a lost parcel.")
    other.transfers.append("lost parcel, please help")
    assert one.digest() == other.digest() != before
    assert one.digest() != generate(42).digest()


def test_money_is_shown_with_two_decimals() -> None:
    assert retail.money(12345) == "123.45"
    assert retail.money(5) == "0.05"
    assert retail.money(-250) == "-2.50"


def test_a_copy_shares_nothing_with_its_world() -> None:
    world = generate(42)
    twin = world.copy()
    assert twin.digest() == world.digest()
    order = next(iter(twin.orders.values()))
    order.items[0].options["size"] = "XXL"
    order.payment_history.clear()
    next(iter(twin.users.values())).payment_methods.clear()
    next(iter(twin.products.values())).variants.clear()
    assert twin.digest() != world.digest()
    assert world.digest() == generate(42).digest()
