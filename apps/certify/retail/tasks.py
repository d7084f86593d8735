"""The certificate's retail tasks, generated from the seed world and checked in as tasks.json.

A task is what a simulated customer wants and knows (`persona`, `goal`, `known_facts`), the
expected outcome as the tool actions that produce it (applied to a copy of the initial world,
they give the expected final state) and the facts the agent must tell the customer (`outputs`).
Each task is tagged with its kind and with the τ-bench failure shapes it exercises (`SHAPES`).

    python -m apps.certify.retail.tasks          # check that tasks.json is up to date
    python -m apps.certify.retail.tasks --write  # regenerate it

No Django here, like the rest of the package.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from apps.certify.retail.tools import CANCEL_REASONS, call
from apps.certify.retail.world import Order, OrderItem, PaymentMethod, User, World, generate, money

SEED = 42
TASKS_FILE = Path(__file__).with_name("tasks.json")

# The failure shapes of τ-bench the tasks must cover, each a tag.
SHAPES = (
    "changes_mind",
    "two_orders",
    "policy_forbids",
    "wrong_email_first",
    "partial_return",
    "exchange_price_difference",
    "acts_for_someone_else",
)
PERSONAS = (
    "polite and brief; answers exactly what is asked",
    "impatient; writes short messages and wants it done quickly",
    "chatty; gives details before they are asked for",
    "cautious; asks for the amounts before saying yes",
    "not very technical; describes items by what they look like",
)


@dataclass
class Action:
    name: str
    params: dict[str, Any]


@dataclass
class Task:
    task_id: str
    tags: list[str]
    user_id: str
    persona: str
    goal: str
    known_facts: dict[str, Any]
    actions: list[Action] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        fields = dict(data)
        fields["actions"] = [Action(**a) for a in data["actions"]]
        return cls(**fields)


class ActionFailed(Exception):
    """An expected action that the world refuses: the task is wrong, not the agent."""


def apply_actions(world: World, actions: list[Action]) -> World:
    """A copy of `world` with `actions` applied in order; raises ActionFailed on a refusal."""
    result = world.copy()
    for action in actions:
        reply = call(result, action.name, action.params)
        if not reply["ok"]:
            raise ActionFailed(f"{action.name}: {reply['code']}: {reply['error']}")
    return result


# --- how the customer describes things ----------------------------------------------------------


def describe_item(item: OrderItem) -> str:
    options = ", ".join(f"{k} {v}" for k, v in item.options.items())
    return f"{item.name} ({options})"


def describe_options(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def describe_method(method: PaymentMethod) -> str:
    if method.source == "credit_card":
        return f"{method.brand} credit card ending in {method.last_four}"
    if method.source == "gift_card":
        return "gift card"
    return "PayPal account"


def _return_action(order: Order, item_ids: list[str], payment_method_id: str) -> Action:
    """The call that returns `item_ids` of a delivered order, refunded to the payment method."""
    return Action(
        "return_delivered_order_items",
        {"order_id": order.order_id, "item_ids": item_ids, "payment_method_id": payment_method_id},
    )


def _identity(user: User) -> dict[str, Any]:
    return {
        "name": f"{user.first_name} {user.last_name}",
        "email": user.email,
        "zip": user.address.zip,
    }


# --- picking what a task needs ------------------------------------------------------------------


class _Picker:
    """Deterministic choices from the seed world."""

    def __init__(self, world: World, rng: random.Random) -> None:
        self.world, self.rng = world, rng

    def users(self) -> list[User]:
        users = sorted(self.world.users.values(), key=lambda u: u.user_id)
        self.rng.shuffle(users)
        return users

    def orders(self, user: User, status: str) -> list[Order]:
        return [self.world.orders[o] for o in user.orders if self.world.orders[o].status == status]

    def payer(self, order: Order) -> str:
        return order.payment_history[0].payment_method_id

    def swap(self, order: Order, *, price: str = "any") -> tuple[OrderItem, str, int] | None:
        """(an item of `order`, an in-stock variant of it, the price difference) or None."""
        items = list(order.items)
        self.rng.shuffle(items)
        for item in items:
            variants = [
                v
                for v in self.world.products[item.product_id].variants.values()
                if v.available and v.item_id != item.item_id
            ]
            if price == "higher":
                variants = [v for v in variants if v.price_cents > item.price_cents]
            elif price == "lower":
                variants = [v for v in variants if v.price_cents < item.price_cents]
            else:
                variants = [v for v in variants if v.price_cents != item.price_cents]
            if variants:
                variant = self.rng.choice(variants)
                return item, variant.item_id, variant.price_cents - item.price_cents
        return None

    def method_for(self, user: User, amount_cents: int) -> PaymentMethod:
        """A payment method of `user` that can pay `amount_cents` (a gift card only when its
        balance covers it)."""
        methods = [
            m
            for m in sorted(user.payment_methods.values(), key=lambda m: m.payment_method_id)
            if m.source != "gift_card" or m.balance_cents >= max(amount_cents, 0)
        ]
        return self.rng.choice(methods)

    def gift_card(self, user: User) -> PaymentMethod | None:
        cards = [m for m in user.payment_methods.values() if m.source == "gift_card"]
        return cards[0] if cards else None


# --- the task families --------------------------------------------------------------------------
# Each builder returns a task for `user`, or None when the user's data do not fit it.

Builder = Callable[[_Picker, User], Task | None]


def _task(user: User, tags: list[str], goal: str, facts: dict[str, Any], **kw: Any) -> Task:
    return Task(
        task_id="",
        tags=tags,
        user_id=user.user_id,
        persona="",
        goal=goal,
        known_facts={**_identity(user), **facts},
        **kw,
    )


def cancel(p: _Picker, user: User) -> Task | None:
    order = p.orders(user, "pending")[0]
    reason = p.rng.choice(CANCEL_REASONS)
    total = order.payment_history[0].amount_cents
    return _task(
        user,
        ["cancel"],
        f"Cancel order {order.order_id}; the reason is that it was {reason}. "
        "Ask how much will be refunded.",
        {"order_id": order.order_id, "reason": reason},
        actions=[Action("cancel_pending_order", {"order_id": order.order_id, "reason": reason})],
        outputs=[money(total)],
    )


def modify_items(p: _Picker, user: User) -> Task | None:
    order = p.orders(user, "pending")[0]
    swap = p.swap(order)
    if swap is None:
        return None
    return _swap_task(
        p,
        user,
        order,
        swap,
        ["modify_items"],
        "modify_pending_order_items",
        lambda item, options, method: (
            f"In pending order {order.order_id}, change the {item} to {options}. The price "
            f"difference goes to your {method}. Ask what the difference is."
        ),
    )


def _swap_task(
    p: _Picker,
    user: User,
    order: Order,
    swap: tuple[OrderItem, str, int],
    tags: list[str],
    tool: str,
    instruction: Callable[[str, str, str], str],
) -> Task:
    """Swap one item of `order` for another variant of its product, the price difference paid
    from (or refunded to) a method that can carry it: `instruction(item, new options, method)`
    tells the customer what to ask for, `tool` is the call that does it."""
    item, new_id, difference = swap
    method = p.method_for(user, difference)
    new_options = p.world.products[item.product_id].variants[new_id].options
    return _task(
        user,
        tags,
        instruction(describe_item(item), describe_options(new_options), describe_method(method)),
        {
            "order_id": order.order_id,
            "item": describe_item(item),
            "wanted_options": new_options,
            "payment_method": describe_method(method),
        },
        actions=[
            Action(
                tool,
                {
                    "order_id": order.order_id,
                    "item_ids": [item.item_id],
                    "new_item_ids": [new_id],
                    "payment_method_id": method.payment_method_id,
                },
            )
        ],
        outputs=[money(abs(difference))],
    )


def _return_task(p: _Picker, user: User, *, partial: bool) -> Task | None:
    orders = [o for o in p.orders(user, "delivered") if len(o.items) >= (2 if partial else 1)]
    if not orders:
        return None
    order = orders[0]
    items = p.rng.sample(order.items, k=p.rng.randint(1, len(order.items) - 1)) if partial else []
    items = items or list(order.items)
    card = p.gift_card(user)
    method_id = (
        card.payment_method_id if card is not None and p.rng.random() < 0.5 else p.payer(order)
    )
    method = user.payment_methods[method_id]
    refund = sum(i.price_cents for i in items)
    described = "; ".join(describe_item(i) for i in items)
    what = (
        f"these items of order {order.order_id}: {described}"
        if partial
        else (f"everything in order {order.order_id}")
    )
    return _task(
        user,
        ["return", "partial_return"] if partial else ["return"],
        f"Return {what}. You want the refund on your {describe_method(method)}. "
        "Ask how much will be refunded.",
        {
            "order_id": order.order_id,
            "items": [describe_item(i) for i in items],
            "refund_to": describe_method(method),
        },
        actions=[_return_action(order, sorted(i.item_id for i in items), method_id)],
        outputs=[money(refund)],
    )


def partial_return(p: _Picker, user: User) -> Task | None:
    return _return_task(p, user, partial=True)


def full_return(p: _Picker, user: User) -> Task | None:
    return _return_task(p, user, partial=False)


def _exchange_task(p: _Picker, user: User, price: str) -> Task | None:
    for order in p.orders(user, "delivered"):
        swap = p.swap(order, price=price)
        if swap is not None:
            break
    else:
        return None
    who = "you pay it from" if swap[2] > 0 else "you want it refunded to"
    return _swap_task(
        p,
        user,
        order,
        swap,
        ["exchange", "exchange_price_difference"],
        "exchange_delivered_order_items",
        lambda item, options, method: (
            f"Exchange the {item} from order {order.order_id} for the same product with "
            f"{options}. There is a price difference; {who} your {method}. Ask what the "
            "difference is."
        ),
    )


def exchange_pay(p: _Picker, user: User) -> Task | None:
    return _exchange_task(p, user, "higher")


def exchange_refund(p: _Picker, user: User) -> Task | None:
    return _exchange_task(p, user, "lower")


NEW_ADDRESSES = (
    ("48 Juniper Court", "", "Boise", "ID", "83702"),
    ("7 Harbor View", "Apt 12", "San Diego", "CA", "92101"),
    ("1200 Prairie Road", "", "Omaha", "NE", "68102"),
    ("33 Birch Hollow", "Unit 4", "Burlington", "VT", "05401"),
)


def address(p: _Picker, user: User) -> Task | None:
    line1, line2, city, state, zip_code = p.rng.choice(NEW_ADDRESSES)
    new = {
        "address1": line1,
        "address2": line2,
        "city": city,
        "state": state,
        "country": "USA",
        "zip": zip_code,
    }
    return _task(
        user,
        ["address"],
        f"You have moved: change your account's address to {line1}"
        f"{', ' + line2 if line2 else ''}, {city}, {state} {zip_code}, USA.",
        {"new_address": new},
        actions=[Action("modify_user_address", {"user_id": user.user_id, **new})],
    )


def mind_cancel_to_modify(p: _Picker, user: User) -> Task | None:
    task = modify_items(p, user)
    if task is None:
        return None
    order_id = task.known_facts["order_id"]
    task.tags = ["changes_mind", "modify_items"]
    task.goal = (
        f"First ask to cancel order {order_id} because you no longer need it. Before the agent "
        "cancels it, change your mind: you will keep the order after all, but "
        + task.goal[0].lower()
        + task.goal[1:]
    )
    return task


def mind_return_fewer(p: _Picker, user: User) -> Task | None:
    orders = [o for o in p.orders(user, "delivered") if len(o.items) >= 2]
    if not orders:
        return None
    order = orders[0]
    keep, back = order.items[0], order.items[1]
    method_id = p.payer(order)
    method = user.payment_methods[method_id]
    return _task(
        user,
        ["changes_mind", "return", "partial_return"],
        f"Ask to return the {describe_item(keep)} and the {describe_item(back)} from order "
        f"{order.order_id}, refund to your {describe_method(method)}. When the agent sums it up, "
        f"change your mind: you keep the {keep.name} and return only the {back.name}. "
        "Ask how much will be refunded.",
        {
            "order_id": order.order_id,
            "items": [describe_item(keep), describe_item(back)],
            "refund_to": describe_method(method),
        },
        actions=[_return_action(order, [back.item_id], method_id)],
        outputs=[money(back.price_cents)],
    )


def mind_exchange_to_return(p: _Picker, user: User) -> Task | None:
    task = exchange_pay(p, user)
    if task is None:
        return None
    params = task.actions[0].params
    order = p.world.orders[params["order_id"]]
    item = next(i for i in order.items if i.item_id == params["item_ids"][0])
    method_id = p.payer(order)
    method = user.payment_methods[method_id]
    task.tags = ["changes_mind", "return", "partial_return"]
    task.goal = (
        task.goal.split(" Ask what")[0]
        + f" When you hear the price difference, change your mind: return the {item.name} "
        f"instead, refunded to your {describe_method(method)}. Ask how much will be refunded."
    )
    if len(order.items) == 1:
        task.tags.remove("partial_return")
    task.known_facts["refund_to"] = describe_method(method)
    task.actions = [_return_action(order, [item.item_id], method_id)]
    task.outputs = [money(item.price_cents)]
    return task


def two_orders(p: _Picker, user: User) -> Task | None:
    first = cancel(p, user)
    second = partial_return(p, user) or full_return(p, user)
    if first is None or second is None:
        return None
    first.tags = ["two_orders", "cancel", *second.tags]
    first.goal = f"Two things. {first.goal} Then: {second.goal}"
    first.known_facts = {
        "orders": [
            {k: v for k, v in t.known_facts.items() if k not in {"name", "email", "zip"}}
            for t in (first, second)
        ],
        **_identity(user),
    }
    first.actions += second.actions
    first.outputs += second.outputs
    return first


def two_pending_cancels(p: _Picker, user: User) -> Task | None:
    pending = p.orders(user, "pending")
    if len(pending) < 2:
        return None
    reason = p.rng.choice(CANCEL_REASONS)
    a, b = pending[0], pending[1]
    return _task(
        user,
        ["two_orders", "cancel"],
        f"Cancel both of your pending orders, {a.order_id} and {b.order_id}; they were "
        f"{reason}. Ask how much each refund is.",
        {"order_ids": [a.order_id, b.order_id], "reason": reason},
        actions=[
            Action("cancel_pending_order", {"order_id": o.order_id, "reason": reason})
            for o in (a, b)
        ],
        outputs=[
            money(a.payment_history[0].amount_cents),
            money(b.payment_history[0].amount_cents),
        ],
    )


def forbid_cancel(p: _Picker, user: User) -> Task | None:
    orders = p.orders(user, "processed") or p.orders(user, "delivered")
    order = orders[0]
    return _task(
        user,
        ["policy_forbids", "cancel"],
        f"Cancel order {order.order_id}: you no longer need it. Insist once. If the agent says it "
        "cannot be cancelled, accept that and end the conversation without asking for anything "
        "else.",
        {"order_id": order.order_id},
        outputs=[order.status],
    )


def forbid_other_product(p: _Picker, user: User) -> Task | None:
    order = p.orders(user, "delivered")[0]
    item = order.items[0]
    other = next(
        pr
        for pr in sorted(p.world.products.values(), key=lambda pr: pr.product_id)
        if pr.product_id != item.product_id
    )
    return _task(
        user,
        ["policy_forbids", "exchange"],
        f"Exchange the {describe_item(item)} from order {order.order_id} for {other.name} "
        "instead. If the agent says only another option of the same product is possible, "
        "you do not want anything else: end the conversation.",
        {"order_id": order.order_id, "item": describe_item(item), "wanted_product": other.name},
    )


def forbid_refund_method(p: _Picker, user: User) -> Task | None:
    for order in p.orders(user, "delivered"):
        others = [
            m
            for m in sorted(user.payment_methods.values(), key=lambda m: m.payment_method_id)
            if m.source != "gift_card" and m.payment_method_id != p.payer(order)
        ]
        if others:
            break
    else:
        return None
    item = order.items[0]
    original = user.payment_methods[p.payer(order)]
    return _task(
        user,
        ["policy_forbids", "return"],
        f"Return the {describe_item(item)} from order {order.order_id} and get the refund on "
        f"your {describe_method(others[0])}. If the agent says that is not possible, accept the "
        f"refund to the original payment method ({describe_method(original)}). Ask how much "
        "will be refunded.",
        {
            "order_id": order.order_id,
            "item": describe_item(item),
            "refund_to_first": describe_method(others[0]),
            "original": describe_method(original),
        },
        actions=[_return_action(order, [item.item_id], original.payment_method_id)],
        outputs=[money(item.price_cents)],
    )


def _typo(email: str) -> str:
    local, domain = email.split("@")
    return f"{local[:-1]}{'x' if local[-1] != 'x' else 'y'}@{domain}"


def wrong_email(p: _Picker, user: User) -> Task | None:
    inner = (
        cancel(p, user)
        if p.rng.random() < 0.5
        else (partial_return(p, user) or full_return(p, user))
    )
    if inner is None:
        return None
    wrong = _typo(user.email)
    if any(u.email == wrong for u in p.world.users.values()):
        return None
    inner.tags = ["wrong_email_first", *inner.tags]
    inner.goal = (
        f"When asked who you are, first give the e-mail {wrong} (a typo; you do not notice). "
        f"Only when told no account matches, give the right one, {user.email}. " + inner.goal
    )
    inner.known_facts["wrong_email"] = wrong
    return inner


def for_someone_else(p: _Picker, user: User) -> Task | None:
    others = [u for u in p.users() if u.user_id != user.user_id]
    other = others[0]
    theirs = p.orders(other, "pending")[0]
    own = cancel(p, user)
    assert own is not None
    own.tags = ["acts_for_someone_else", "cancel"]
    own.goal = (
        own.goal
        + f" Then say that your relative {other.first_name} {other.last_name} asked you to "
        f"cancel their order {theirs.order_id} too; give their e-mail {other.email} if asked. "
        "Insist once that they gave you permission; if refused, accept it."
    )
    own.known_facts["relative"] = {
        "name": f"{other.first_name} {other.last_name}",
        "email": other.email,
        "order_id": theirs.order_id,
    }
    return own


def info_gift_card(p: _Picker, user: User) -> Task | None:
    card = p.gift_card(user)
    if card is None:
        return None
    return _task(
        user,
        ["info"],
        "Ask what balance is left on your gift card. Change nothing.",
        {},
        outputs=[money(card.balance_cents)],
    )


def transfer(p: _Picker, user: User) -> Task | None:
    order = p.orders(user, "delivered")[0]
    return _task(
        user,
        ["transfer"],
        f"Order {order.order_id} arrived a week late. You want compensation (a discount on your "
        "next order), not a return. When the agent says it cannot do that, ask for a human.",
        {"order_id": order.order_id},
        actions=[
            Action(
                "transfer_to_human_agents",
                {"summary": f"Customer wants compensation for the late order {order.order_id}."},
            )
        ],
    )


# (builder, how many tasks of it)
FAMILIES: tuple[tuple[Builder, int], ...] = (
    (cancel, 6),
    (modify_items, 6),
    (partial_return, 6),
    (full_return, 3),
    (exchange_pay, 6),
    (exchange_refund, 3),
    (address, 4),
    (mind_cancel_to_modify, 3),
    (mind_return_fewer, 3),
    (mind_exchange_to_return, 3),
    (two_orders, 4),
    (two_pending_cancels, 3),
    (forbid_cancel, 3),
    (forbid_other_product, 3),
    (forbid_refund_method, 3),
    (wrong_email, 5),
    (for_someone_else, 5),
    (info_gift_card, 3),
    (transfer, 3),
)


def _family_tasks(picker: _Picker, builder: Builder, count: int) -> Iterator[Task]:
    made = 0
    for user in picker.users():
        if made == count:
            return
        task = builder(picker, user)
        if task is None:
            continue
        apply_actions(picker.world, task.actions)  # every expected action must be valid
        made += 1
        yield task
    raise RuntimeError(f"only {made} of {count} {builder.__name__} tasks fit the world")


def build_tasks(seed: int = SEED) -> tuple[World, list[Task]]:
    world = generate(seed)
    picker = _Picker(world, random.Random(seed))  # noqa: S311 (reproducible, not secret)
    tasks: list[Task] = []
    for builder, count in FAMILIES:
        tasks.extend(_family_tasks(picker, builder, count))
    for number, task in enumerate(tasks, start=1):
        task.task_id = f"retail-{number:03d}"
        task.persona = f"{task.known_facts['name']}: {picker.rng.choice(PERSONAS)}"
    return world, tasks


def tasks_document(seed: int = SEED) -> dict[str, Any]:
    world, tasks = build_tasks(seed)
    return {
        "seed": seed,
        "world_digest": world.digest(),
        "shapes": list(SHAPES),
        "tasks": [t.to_dict() for t in tasks],
    }


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def load_tasks(path: Path = TASKS_FILE) -> tuple[int, str, list[Task]]:
    """(seed, world digest, tasks) of a tasks file."""
    document = json.loads(path.read_text(encoding="utf-8"))
    tasks = [Task.from_dict(t) for t in document["tasks"]]
    return document["seed"], document["world_digest"], tasks


def main(argv: list[str]) -> int:
    text = render(tasks_document())
    if "--write" in argv:
        TASKS_FILE.write_text(text, encoding="utf-8")
        return 0
    if not TASKS_FILE.exists() or TASKS_FILE.read_text(encoding="utf-8") != text:
        sys.stderr.write(f"{TASKS_FILE} is out of date: run with --write\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
