"""The scripted customer on the tasks' failure shapes: what it says, to what."""

from __future__ import annotations

from functools import cache

from apps.certify.customer import GIVE_UP, GOODBYE, YES, ScriptedCustomer, is_yes
from apps.certify.retail.tasks import Task, load_tasks


@cache
def _tasks() -> list[Task]:
    return load_tasks()[2]


def _task(*tags: str) -> Task:
    return next(t for t in _tasks() if set(tags) <= set(t.tags))


def test_opens_with_the_goal_and_answers_identity_with_its_facts() -> None:
    task = _task("cancel")
    customer = ScriptedCustomer(task)
    opening = customer.opening()
    assert task.known_facts["order_id"] in opening
    assert task.known_facts["reason"] in opening
    answer = customer.reply("Could you tell me your e-mail address?")
    assert task.known_facts["email"] in answer
    assert task.known_facts["zip"] in answer


def test_gives_the_wrong_email_first_where_tagged() -> None:
    task = _task("wrong_email_first")
    customer = ScriptedCustomer(task)
    customer.opening()
    first = customer.reply("What is your e-mail address?")
    assert task.known_facts["wrong_email"] in first
    assert task.known_facts["email"] not in first
    second = customer.reply("I couldn't find an account with that e-mail.")
    assert task.known_facts["email"] in second


def test_yes_only_to_a_confirmation_that_matches_the_goal() -> None:
    task = _task("cancel")
    order_id = task.known_facts["order_id"]
    customer = ScriptedCustomer(task)
    customer.opening()
    other = "#W0000001"
    declined = customer.reply(f"I'll cancel order {other}. Shall I go ahead? (yes/no)")
    assert not is_yes(declined)
    assert declined.startswith("No")
    accepted = customer.reply(f"I'll cancel order {order_id}. Shall I go ahead? (yes/no)")
    assert accepted == YES
    assert is_yes(accepted)
    assert customer.reply(f"Done: order {order_id} is cancelled; 1.00 refunded.") == GOODBYE
    assert customer.finished


def test_changes_its_mind_instead_of_confirming_the_first_wish() -> None:
    task = _task("changes_mind", "modify_items")
    order_id = task.known_facts["order_id"]
    customer = ScriptedCustomer(task)
    assert "cancel" in customer.opening()
    switch = customer.reply(f"I'll cancel order {order_id}. Shall I go ahead? (yes/no)")
    assert "changed my mind" in switch
    assert "cancel" not in switch.lower()
    assert customer.reply(f"I'll change the item in order {order_id}. Confirm (yes/no)?") == YES


def test_return_fewer_refuses_a_proposal_with_the_kept_item() -> None:
    task = next(
        t for t in _tasks() if "changes_mind" in t.tags and len(t.known_facts.get("items", [])) == 2
    )
    order_id = task.known_facts["order_id"]
    keep, back = (i.split(" (")[0] for i in task.known_facts["items"])
    customer = ScriptedCustomer(task)
    customer.opening()
    customer.reply(f"I'll return {keep}, {back} from {order_id}. Shall I go ahead? (yes/no)")
    again = customer.reply(
        f"I'll return {keep}, {back} from {order_id}. Shall I go ahead? (yes/no)"
    )
    assert not is_yes(again)
    assert customer.reply(f"I'll return {back} from {order_id}. Shall I go ahead? (yes/no)") == YES


def test_two_orders_are_two_requests() -> None:
    task = _task("two_orders", "return")
    first, second = task.known_facts["orders"]
    customer = ScriptedCustomer(task)
    assert first["order_id"] in customer.opening()
    assert customer.reply(f"Cancel {first['order_id']}? Please confirm (yes/no).") == YES
    following = customer.reply(f"Done: order {first['order_id']} is cancelled.")
    assert second["order_id"] in following
    assert not customer.finished


def test_policy_forbids_insists_once_then_accepts() -> None:
    task = _task("policy_forbids", "cancel")
    customer = ScriptedCustomer(task)
    customer.opening()
    why = customer.reply("Why do you want to cancel: no longer needed, or ordered by mistake?")
    assert "no longer needed" in why
    insist = customer.reply("Sorry, that order cannot be cancelled: it is processed.")
    assert "sure" in insist.lower()
    assert not customer.finished
    assert customer.reply("It still cannot be cancelled.") == GIVE_UP
    assert customer.finished


def test_acts_for_someone_else_asks_for_the_relatives_order_after_its_own() -> None:
    task = _task("acts_for_someone_else")
    own, relative = task.known_facts["order_id"], task.known_facts["relative"]
    customer = ScriptedCustomer(task)
    customer.opening()
    assert customer.reply(f"Cancel {own}? Please confirm (yes/no).") == YES
    ask = customer.reply(f"Done: order {own} is cancelled.")
    assert relative["order_id"] in ask
    insist = customer.reply("I can't do that for another person's order.")
    assert "permission" in insist


def test_stops_after_restating_twice() -> None:
    customer = ScriptedCustomer(_task("address"))
    customer.opening()
    customer.reply("Hello.")
    customer.reply("Hello.")
    assert customer.reply("Hello.") == GIVE_UP
    assert customer.finished
