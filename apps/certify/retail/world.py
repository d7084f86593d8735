"""The retail back office's state: users, their payment methods, products with variants, orders.

Plain dataclasses, generated deterministically from a seed (`generate(seed)`), serialised to and
from JSON (`to_json` / `from_json`) and summarised by a stable `digest()`: two worlds with the same
state have the same digest whatever the order their dicts were filled in. Money is held in
integer cents so that sums are exact and the JSON is the same on every machine.

No Django here: the certificate's harness, the servers and the tests use it as a library.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

ORDER_STATUSES = (
    "pending",
    "pending (item modified)",
    "processed",
    "delivered",
    "cancelled",
    "return requested",
    "exchange requested",
)


def money(cents: int) -> str:
    """`12345` -> `"123.45"`: how amounts are shown to the agent and looked for in its replies."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


@dataclass
class Address:
    address1: str
    address2: str
    city: str
    state: str
    country: str
    zip: str


@dataclass
class PaymentMethod:
    payment_method_id: str
    source: str  # credit_card | gift_card | paypal
    brand: str = ""  # credit cards
    last_four: str = ""  # credit cards
    balance_cents: int = 0  # gift cards


@dataclass
class User:
    user_id: str
    first_name: str
    last_name: str
    email: str
    address: Address
    payment_methods: dict[str, PaymentMethod]
    orders: list[str]


@dataclass
class Variant:
    item_id: str
    options: dict[str, str]
    price_cents: int
    available: bool


@dataclass
class Product:
    product_id: str
    name: str
    variants: dict[str, Variant]


@dataclass
class OrderItem:
    item_id: str
    product_id: str
    name: str
    options: dict[str, str]
    price_cents: int


@dataclass
class Payment:
    transaction_type: str  # payment | refund
    amount_cents: int
    payment_method_id: str


@dataclass
class Order:
    order_id: str
    user_id: str
    address: Address
    items: list[OrderItem]
    status: str
    payment_history: list[Payment]
    cancel_reason: str = ""
    # A return or exchange asked for (status "return requested" / "exchange requested").
    return_items: list[str] = field(default_factory=list)
    return_payment_method_id: str = ""
    exchange_items: list[str] = field(default_factory=list)
    exchange_new_items: list[str] = field(default_factory=list)
    exchange_payment_method_id: str = ""
    exchange_price_difference_cents: int = 0


@dataclass
class World:
    seed: int
    users: dict[str, User]
    products: dict[str, Product]
    orders: dict[str, Order]
    # Summaries handed to human agents. The digest counts them but ignores their wording, so a
    # transfer is graded as having happened, however the agent phrased it.
    transfers: list[str] = field(default_factory=list)

    def copy(self) -> World:
        # Rebuilt from its dict (which shares nothing with it): 3x faster than a deepcopy.
        return from_dict(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def state(self) -> dict[str, Any]:
        """What the grader compares: everything but the wording of transfer summaries."""
        data = self.to_dict()
        data["transfers"] = len(self.transfers)
        return data

    def digest(self) -> str:
        text = json.dumps(self.state(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def variant(self, item_id: str) -> tuple[Product, Variant] | None:
        for product in self.products.values():
            if item_id in product.variants:
                return product, product.variants[item_id]
        return None


def _address(data: dict[str, Any]) -> Address:
    return Address(**data)


def from_dict(data: dict[str, Any]) -> World:
    users = {
        uid: User(
            user_id=u["user_id"],
            first_name=u["first_name"],
            last_name=u["last_name"],
            email=u["email"],
            address=_address(u["address"]),
            payment_methods={k: PaymentMethod(**p) for k, p in u["payment_methods"].items()},
            orders=list(u["orders"]),
        )
        for uid, u in data["users"].items()
    }
    products = {
        pid: Product(
            product_id=p["product_id"],
            name=p["name"],
            variants={k: Variant(**v) for k, v in p["variants"].items()},
        )
        for pid, p in data["products"].items()
    }
    orders = {}
    for oid, o in data["orders"].items():
        fields = dict(o)
        fields["address"] = _address(o["address"])
        fields["items"] = [OrderItem(**i) for i in o["items"]]
        fields["payment_history"] = [Payment(**p) for p in o["payment_history"]]
        orders[oid] = Order(**fields)
    return World(
        seed=data["seed"],
        users=users,
        products=products,
        orders=orders,
        transfers=list(data.get("transfers", [])),
    )


def from_json(text: str) -> World:
    return from_dict(json.loads(text))


# --- generation ---------------------------------------------------------------------------------

FIRST_NAMES = (
    "Aarav", "Amelia", "Chen", "Daiki", "Elena", "Fatima", "Grace", "Hugo", "Isabela", "James",
    "Kofi", "Lena", "Mateo", "Mei", "Noah", "Olivia", "Priya", "Rafael", "Sofia", "Yusuf",
)  # fmt: skip
LAST_NAMES = (
    "Garcia", "Ito", "Johansson", "Kim", "Lopez", "Martin", "Nguyen", "Okafor", "Patel", "Rossi",
    "Schmidt", "Silva", "Smith", "Wang", "Yilmaz",
)  # fmt: skip
CITIES = (
    ("Denver", "CO", "802"), ("Austin", "TX", "787"), ("Seattle", "WA", "981"),
    ("Boston", "MA", "021"), ("Chicago", "IL", "606"), ("Phoenix", "AZ", "850"),
    ("Portland", "OR", "972"), ("Columbus", "OH", "432"),
)  # fmt: skip
STREETS = (
    "Maple Drive",
    "Cedar Street",
    "Hillcrest Road",
    "Lake Avenue",
    "Elm Street",
    "Pine Lane",
)
CARD_BRANDS = ("visa", "mastercard", "amex")

# name -> (option name -> values, base price in cents)
CATALOGUE: tuple[tuple[str, dict[str, tuple[str, ...]], int], ...] = (
    ("Hiking Boots", {"size": ("8", "9", "10", "11"), "color": ("brown", "black")}, 14900),
    ("Rain Jacket", {"size": ("S", "M", "L"), "color": ("red", "navy", "green")}, 11900),
    ("Backpack", {"capacity": ("30L", "45L", "60L"), "color": ("grey", "orange")}, 12900),
    ("Tent", {"capacity": ("1-person", "2-person", "4-person")}, 24900),
    ("Sleeping Bag", {"rating": ("0F", "20F", "40F"), "zip": ("left", "right")}, 17900),
    ("Water Bottle", {"capacity": ("500ml", "1L"), "material": ("steel", "plastic")}, 2400),
    ("Headlamp", {"brightness": ("200 lumens", "400 lumens"), "color": ("black", "yellow")}, 3900),
    ("Trekking Poles", {"material": ("aluminium", "carbon")}, 8900),
    ("Wool Socks", {"size": ("S", "M", "L"), "cushion": ("light", "heavy")}, 1900),
    ("Camp Stove", {"fuel": ("canister", "liquid")}, 7900),
    ("Fleece Pullover", {"size": ("S", "M", "L", "XL"), "color": ("blue", "charcoal")}, 6900),
    ("Sunglasses", {"lens": ("polarized", "standard"), "frame": ("black", "tortoise")}, 5900),
)  # fmt: skip

USER_COUNT = 40


def _combinations(options: dict[str, tuple[str, ...]]) -> list[dict[str, str]]:
    combos: list[dict[str, str]] = [{}]
    for name, values in options.items():
        combos = [{**combo, name: value} for combo in combos for value in values]
    return combos


def _products(rng: random.Random, ids: set[str]) -> dict[str, Product]:
    products: dict[str, Product] = {}
    for index, (name, options, base) in enumerate(CATALOGUE):
        product_id = f"P{100 + index}"
        variants: dict[str, Variant] = {}
        for combo in _combinations(options):
            item_id = _unique_id(rng, ids, lambda: str(rng.randint(10**9, 10**10 - 1)))
            # Prices differ between variants (size, capacity ...) by up to ±15 %, in whole cents.
            price = base + rng.randint(-15, 15) * base // 100 + rng.choice((0, 50, 99))
            variants[item_id] = Variant(item_id, combo, price, rng.random() > 0.2)
        products[product_id] = Product(product_id, name, variants)
    return products


def _unique_id(rng: random.Random, ids: set[str], make: Any) -> str:
    while True:
        candidate = str(make())
        if candidate not in ids:
            ids.add(candidate)
            return candidate


def _payment_methods(rng: random.Random, ids: set[str]) -> dict[str, PaymentMethod]:
    methods: dict[str, PaymentMethod] = {}
    kinds = rng.sample(("credit_card", "gift_card", "paypal"), k=rng.randint(1, 3))
    if "credit_card" not in kinds and "paypal" not in kinds:
        kinds.append("credit_card")  # every user can pay for anything
    for kind in sorted(kinds):
        number = _unique_id(rng, ids, lambda: rng.randint(1_000_000, 9_999_999))
        method_id = f"{kind}_{number}"
        if kind == "credit_card":
            methods[method_id] = PaymentMethod(
                method_id, kind, brand=rng.choice(CARD_BRANDS), last_four=number[-4:]
            )
        elif kind == "gift_card":
            methods[method_id] = PaymentMethod(
                method_id, kind, balance_cents=rng.randint(0, 300) * 100
            )
        else:
            methods[method_id] = PaymentMethod(method_id, kind)
    return methods


def _user(rng: random.Random, ids: set[str], emails: set[str]) -> User:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    number = _unique_id(rng, ids, lambda: rng.randint(1000, 9999))
    user_id = f"{first.lower()}_{last.lower()}_{number}"
    email = _unique_id(
        rng, emails, lambda: f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com"
    )
    city, state, zip_prefix = rng.choice(CITIES)
    address = Address(
        address1=f"{rng.randint(10, 999)} {rng.choice(STREETS)}",
        address2=rng.choice(("", f"Suite {rng.randint(100, 999)}", f"Apt {rng.randint(1, 40)}")),
        city=city,
        state=state,
        country="USA",
        zip=f"{zip_prefix}{rng.randint(10, 99)}",
    )
    return User(user_id, first, last, email, address, _payment_methods(rng, ids), [])


def _order(
    rng: random.Random, ids: set[str], user: User, products: dict[str, Product], status: str
) -> Order:
    order_id = "#W" + _unique_id(rng, ids, lambda: rng.randint(1_000_000, 9_999_999))
    chosen = rng.sample(sorted(products), k=rng.randint(1, 4))
    items = []
    for product_id in chosen:
        product = products[product_id]
        variant = product.variants[rng.choice(sorted(product.variants))]
        items.append(
            OrderItem(
                variant.item_id,
                product_id,
                product.name,
                dict(variant.options),
                variant.price_cents,
            )
        )
    total = sum(item.price_cents for item in items)
    payers = [m for m in sorted(user.payment_methods) if not m.startswith("gift_card")]
    gift = [m for m in sorted(user.payment_methods) if m.startswith("gift_card")]
    payer = rng.choice(payers + gift) if gift and rng.random() < 0.3 else rng.choice(payers)
    order = Order(
        order_id=order_id,
        user_id=user.user_id,
        address=copy.deepcopy(user.address),
        items=items,
        status=status,
        payment_history=[Payment("payment", total, payer)],
    )
    if status == "cancelled":
        order.cancel_reason = rng.choice(("no longer needed", "ordered by mistake"))
        order.payment_history.append(Payment("refund", total, payer))
    user.orders.append(order_id)
    return order


def generate(seed: int) -> World:
    """The world of `seed`: the same seed always gives the same world (and digest)."""
    rng = random.Random(seed)  # noqa: S311 (reproducible test data, not secrets)
    ids: set[str] = set()
    emails: set[str] = set()
    products = _products(rng, ids)
    users: dict[str, User] = {}
    orders: dict[str, Order] = {}
    statuses = ("pending", "pending", "processed", "delivered", "delivered", "cancelled")
    for index in range(USER_COUNT):
        user = _user(rng, ids, emails)
        users[user.user_id] = user
        # Every user has a pending and a delivered order (the tasks need both), then 0-3 more.
        count = rng.randint(0, 3)
        picked = ["pending", "delivered", *(rng.choice(statuses) for _ in range(count))]
        if index % 2:
            picked.reverse()
        for status in picked:
            order = _order(rng, ids, user, products, status)
            orders[order.order_id] = order
    return World(seed=seed, users=users, products=products, orders=orders)
