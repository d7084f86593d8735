"""The retail tasks: enough of them, every failure shape, valid on the seed world, and a grader
that passes the expected end state and fails a wrong one."""

from __future__ import annotations

import pytest

from apps.certify.retail import tasks as retail_tasks
from apps.certify.retail.grade import grade, told
from apps.certify.retail.tasks import SHAPES, Action, Task, apply_actions, load_tasks
from apps.certify.retail.tools import call
from apps.certify.retail.world import World, generate

SEED, DIGEST, TASKS = load_tasks()
INITIAL = generate(SEED)


def _agent_says(task: Task) -> str:
    """What an agent that did the task right would have said (with the outputs in it)."""
    return "Done. " + " and ".join(f"${o}" for o in task.outputs) + "."


def test_the_checked_in_tasks_are_what_the_generator_makes() -> None:
    document = retail_tasks.tasks_document(SEED)
    assert retail_tasks.TASKS_FILE.read_text(encoding="utf-8") == retail_tasks.render(document)
    assert retail_tasks.main([]) == 0


def test_the_tasks_file_names_the_seed_worlds_digest() -> None:
    assert INITIAL.digest() == DIGEST


def test_at_least_sixty_tasks_with_unique_ids() -> None:
    assert len(TASKS) >= 60
    assert len({t.task_id for t in TASKS}) == len(TASKS)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_failure_shape_is_covered(shape: str) -> None:
    assert sum(shape in t.tags for t in TASKS) >= 3


def test_every_task_has_a_customer_who_can_authenticate() -> None:
    for task in TASKS:
        user = INITIAL.users[task.user_id]
        assert task.persona and task.goal
        assert task.known_facts["email"] == user.email
        assert task.known_facts["zip"] == user.address.zip
        assert task.known_facts["name"] == f"{user.first_name} {user.last_name}"


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.task_id)
def test_expected_actions_are_valid_and_the_grader_passes_them(task: Task) -> None:
    final = apply_actions(INITIAL, task.actions)  # raises if one is refused
    if task.actions:
        changed = [
            a for a in task.actions if a.name not in {"get_user_details", "get_order_details"}
        ]
        assert changed and final.digest() != INITIAL.digest()
    # Only the task's own customer's data are touched.
    for action in task.actions:
        order_id = action.params.get("order_id")
        if order_id:
            assert INITIAL.orders[order_id].user_id == task.user_id
    result = grade(INITIAL, final, _agent_says(task), task)
    assert result.passed, result.reasons
    assert INITIAL.digest() == DIGEST  # grading never changes the initial world


def test_a_forbidden_request_expects_no_change_but_an_allowed_fallback() -> None:
    forbids = [t for t in TASKS if "policy_forbids" in t.tags]
    assert any(not t.actions for t in forbids)
    for task in (t for t in TASKS if "acts_for_someone_else" in t.tags):
        relative_order = task.known_facts["relative"]["order_id"]
        assert INITIAL.orders[relative_order].user_id != task.user_id
        assert all(a.params.get("order_id") != relative_order for a in task.actions)


def test_a_changed_mind_expects_only_the_final_wish() -> None:
    for task in (t for t in TASKS if "changes_mind" in t.tags):
        assert len(task.actions) == 1
        assert task.actions[0].name != "cancel_pending_order"


def _task(tag: str) -> Task:
    return next(t for t in TASKS if tag in t.tags)


def test_grader_fails_when_another_order_is_cancelled() -> None:
    task = _task("acts_for_someone_else")
    final = apply_actions(INITIAL, task.actions)
    relative = task.known_facts["relative"]["order_id"]
    assert call(
        final, "cancel_pending_order", {"order_id": relative, "reason": "no longer needed"}
    )["ok"]
    result = grade(INITIAL, final, _agent_says(task), task)
    assert not result.passed
    assert any(relative in r and "status" in r for r in result.reasons), result.reasons


def test_grader_fails_a_wrong_amount() -> None:
    """The exchange was made, but the difference charged to another payment method."""
    task = next(
        t
        for t in TASKS
        if "exchange_price_difference" in t.tags
        and t.actions[0].name == "exchange_delivered_order_items"
        and len(INITIAL.users[t.user_id].payment_methods) > 1
    )
    params = task.actions[0].params
    other = next(
        m for m in INITIAL.users[task.user_id].payment_methods if m != params["payment_method_id"]
    )
    wrong = Action(task.actions[0].name, {**params, "payment_method_id": other})
    try:
        final = apply_actions(INITIAL, [wrong])
    except retail_tasks.ActionFailed:
        pytest.skip("the other payment method cannot pay this difference")
    result = grade(INITIAL, final, _agent_says(task), task)
    assert not result.passed
    assert any("exchange_payment_method_id" in r for r in result.reasons), result.reasons


def test_grader_fails_a_partial_return_of_the_wrong_items() -> None:
    task = next(t for t in TASKS if "partial_return" in t.tags and "changes_mind" in t.tags)
    order = INITIAL.orders[task.actions[0].params["order_id"]]
    everything = Action(
        "return_delivered_order_items",
        {**task.actions[0].params, "item_ids": sorted(i.item_id for i in order.items)},
    )
    final = apply_actions(INITIAL, [everything])
    result = grade(INITIAL, final, _agent_says(task), task)
    assert not result.passed
    assert any("return_items" in r for r in result.reasons)


def test_grader_fails_a_missing_output_and_nothing_done() -> None:
    task = _task("partial_return")
    final = apply_actions(INITIAL, task.actions)
    result = grade(INITIAL, final, "Your return is on its way.", task)
    assert not result.passed
    assert result.reasons == [f"The customer was not told {task.outputs[0]!r}."]
    result = grade(INITIAL, INITIAL.copy(), _agent_says(task), task)
    assert not result.passed
    assert result.reasons[0] == "The final database state is not the expected one."


def test_grader_fails_an_unneeded_transfer() -> None:
    task = _task("policy_forbids")
    final: World = apply_actions(INITIAL, task.actions)
    call(final, "transfer_to_human_agents", {"summary": "Customer insists."})
    assert not grade(INITIAL, final, _agent_says(task), task).passed


def test_outputs_are_found_as_whole_amounts() -> None:
    assert told("75.51", "That is $75.51, refunded in 5-7 days.")
    assert told("1234.56", "You get 1,234.56 back")
    assert not told("75.51", "That is $175.51.")
    assert not told("75.51", "That is 75.512.")
    assert told("processed", "The order is already Processed.")


def test_another_seed_builds_as_many_valid_tasks_the_same_way_twice() -> None:
    world, tasks = retail_tasks.build_tasks(7)
    again = retail_tasks.tasks_document(7)
    assert [t.to_dict() for t in tasks] == again["tasks"]
    assert again["world_digest"] == world.digest() != DIGEST
    assert len(tasks) == len(TASKS)
    for task in tasks:
        apply_actions(world, task.actions)
