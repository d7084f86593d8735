"""tool_execute's exactly-once bookkeeping, result templates and the tool selectors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from apps.clients.models import Client
from apps.conversations.models import Conversation
from apps.tools.builtins import get_order_status
from apps.tools.models import ClientTool, ExecutionStatus, ExecutorType, ToolExecution
from apps.tools.selectors import tool_execution_list, tool_get_by_name, tool_list_enabled
from apps.tools.services import tool_execute, tool_render_result
from tests.factories import ClientToolFactory
from tests.support.fake_webhook import FakeWebhookServer, Reply, WebhookRequest, verify_signature

SECRET = "s3cret-for-acme"
KEY = "pending-action-7"
PARAMS = {"order_id": "TH-12345"}


@pytest.fixture
def tool(client_a: Client, hook: FakeWebhookServer) -> ClientTool:
    return ClientToolFactory(
        client=client_a,
        name="cancel_order",
        kind="destructive",
        webhook_url=hook.url(),
        signing_secret=SECRET,
        timeout_seconds=5.0,
        max_retries=2,
    )


def execute(client: Client, tool: ClientTool, key: str = KEY, **kwargs: Any) -> ToolExecution:
    return tool_execute(client=client, tool=tool, params=PARAMS, idempotency_key=key, **kwargs)


def test_records_a_successful_webhook_run(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    conversation = Conversation.objects.create(client=client_a)
    hook.script(Reply.ok({"status": "cancelled"}))

    execution = execute(client_a, tool, conversation=conversation)

    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.SUCCEEDED
    assert execution.result == {"status": "cancelled"}
    assert execution.error == ""
    assert execution.attempts == 1
    assert execution.params == PARAMS
    assert (execution.client_id, execution.tool_id) == (client_a.pk, tool.pk)
    assert execution.conversation_id == conversation.pk
    [request] = hook.requests
    assert verify_signature(request, SECRET)
    assert request.idempotency_key == KEY
    # The client's endpoint sees the conversation's public id, not our primary key.
    assert request.conversation_id == str(conversation.public_id)


@pytest.mark.django_db(transaction=True)
def test_running_row_is_committed_before_the_webhook_is_called(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    seen: list[tuple[str, int]] = []

    def look_from_another_connection(request: WebhookRequest) -> Reply:
        # Runs on the server's thread, i.e. on its own database connection: it can only see
        # committed rows, which is what a redelivered turn on another worker would see.
        try:
            seen.extend(
                ToolExecution.objects.unscoped("test checks the database directly")
                .filter(idempotency_key=KEY)
                .values_list("status", "attempts")
            )
        finally:
            connection.close()
        return Reply.ok({"status": "cancelled"})

    hook.script(look_from_another_connection)

    execution = execute(client_a, tool)

    assert seen == [(ExecutionStatus.RUNNING, 0)]
    assert execution.status == ExecutionStatus.SUCCEEDED


def test_500_then_200_is_one_execution_with_two_attempts_under_one_key(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    hook.script(Reply.fail("try again", status=500), Reply.ok({"status": "cancelled"}))

    execution = execute(client_a, tool)

    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 1
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.SUCCEEDED
    assert execution.attempts == 2
    assert [r.idempotency_key for r in hook.requests] == [KEY, KEY]


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (Reply.ok({"status": "cancelled"}), ExecutionStatus.SUCCEEDED),
        (Reply.fail("Order has shipped."), ExecutionStatus.FAILED),
    ],
)
def test_same_key_twice_calls_the_webhook_once(
    client_a: Client,
    tool: ClientTool,
    hook: FakeWebhookServer,
    reply: Reply,
    status: ExecutionStatus,
) -> None:
    hook.default(reply)

    first = execute(client_a, tool)
    second = execute(client_a, tool)

    assert len(hook.requests) == 1
    assert second.pk == first.pk
    assert second.status == first.status == status
    assert (second.result, second.error, second.attempts) == (
        first.result,
        first.error,
        first.attempts,
    )
    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 1


def test_a_running_row_left_by_a_crash_is_rerun_with_the_same_key(
    client_a: Client, tool: ClientTool
) -> None:
    stored_params = {"order_id": "TH-55555"}
    crashed = ToolExecution.objects.create(
        client=client_a, tool=tool, params=stored_params, idempotency_key=KEY, attempts=1
    )
    with FakeWebhookServer(dedupe=True) as hook:
        tool.webhook_url = hook.url()
        hook.script(Reply.ok({"status": "cancelled"}))

        execution = execute(client_a, tool)

    assert execution.pk == crashed.pk
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.SUCCEEDED
    assert execution.result == {"status": "cancelled"}
    assert execution.attempts == 2  # cumulative: the crashed attempt plus this one
    [request] = hook.requests
    assert request.idempotency_key == KEY
    assert request.params == stored_params  # what the key stands for, so the client can dedupe
    assert ToolExecution.objects.unscoped("test checks the database directly").count() == 1


def test_tool_failures_are_recorded_not_raised(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    hook.default(Reply(status=502))

    execution = execute(client_a, tool)

    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.FAILED
    assert execution.result is None
    assert "HTTP 502" in execution.error
    assert execution.attempts == 3


def test_another_tenants_tool_is_refused_before_anything_runs(
    client_a: Client, client_b: Client, hook: FakeWebhookServer
) -> None:
    tool_b = ClientToolFactory(client=client_b, webhook_url=hook.url(), signing_secret=SECRET)

    with pytest.raises(ValueError, match="another client"):
        execute(client_a, tool_b)

    assert not ToolExecution.objects.unscoped("test checks the database directly").exists()
    assert hook.requests == []


def test_a_key_owned_by_another_tenant_is_refused_and_left_alone(
    client_a: Client, client_b: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    tool_b = ClientToolFactory(client=client_b, webhook_url=hook.url(), signing_secret=SECRET)
    theirs = ToolExecution.objects.create(
        client=client_b, tool=tool_b, params=PARAMS, idempotency_key=KEY
    )

    with pytest.raises(ValueError, match="another client"):
        execute(client_a, tool)

    theirs.refresh_from_db()
    assert (theirs.status, theirs.attempts) == (ExecutionStatus.RUNNING, 0)
    assert hook.requests == []


def test_a_key_reused_for_another_tool_is_refused(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    hook.default(Reply.ok({"status": "cancelled"}))
    execute(client_a, tool)
    other_tool = ClientToolFactory(client=client_a, webhook_url=hook.url())

    with pytest.raises(ValueError, match="another tool"):
        execute(client_a, other_tool)

    assert len(hook.requests) == 1


def test_builtin_runs_through_the_same_bookkeeping(client_a: Client) -> None:
    # An order the demo book says is still processing, so it can be cancelled exactly once.
    order_id = next(
        order_id
        for order_id in (f"TH-{n:05d}" for n in range(10001, 10100))
        if get_order_status(client=client_a, params={"order_id": order_id})["status"]
        == "processing"
    )
    tool = ClientToolFactory(
        client=client_a,
        name="cancel_order",
        executor_type=ExecutorType.BUILTIN,
        builtin_handler="demo.cancel_order",
        webhook_url="",
        signing_secret="",
    )
    params = {"order_id": order_id}

    cancelled = tool_execute(client=client_a, tool=tool, params=params, idempotency_key="k1")
    again = tool_execute(client=client_a, tool=tool, params=params, idempotency_key="k2")

    assert cancelled.status == ExecutionStatus.SUCCEEDED
    assert cancelled.result is not None
    assert cancelled.result["status"] == "cancelled"
    assert cancelled.attempts == 1
    # The recorded success is what the demo order book reads: the second cancel is refused.
    assert again.status == ExecutionStatus.FAILED
    assert again.error == f"Order {order_id} has already been cancelled."
    assert again.error_code == "already_cancelled"  # told in the customer's language


# -- concurrency (needs PostgreSQL row locks) ------------------------------------------------


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL (set DATABASE_URL)")


def _wait_for_a_lock_waiter(timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = cursor.fetchone()
            if row and row[0]:
                return
            time.sleep(0.01)
    raise AssertionError("no session ended up waiting on a lock")


def _in_thread(target: Callable[[], Any], results: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(target())
        except Exception as exc:
            results.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _race(
    first: Callable[[], Any],
    started: threading.Event,
    second: Callable[[], Any],
    release: threading.Event,
) -> tuple[Any, Any]:
    """`first` in a thread until it sets `started`, then `second` in another until a session
    waits on a lock; then `release` is set. What each returned (or raised), in that order."""
    first_results: list[Any] = []
    second_results: list[Any] = []
    one = _in_thread(first, first_results)
    assert started.wait(5)
    two = _in_thread(second, second_results)
    _wait_for_a_lock_waiter()
    release.set()
    one.join(5)
    two.join(5)
    [first_result], [second_result] = first_results, second_results
    return first_result, second_result


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("postgres")
def test_the_loser_of_a_creation_race_returns_the_winners_row_without_calling(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    inserted, commit = threading.Event(), threading.Event()

    def winner_inserts_and_holds() -> ToolExecution:
        from django.db import transaction

        with transaction.atomic():
            row = ToolExecution.objects.create(
                client=client_a, tool=tool, params=PARAMS, idempotency_key=KEY
            )
            inserted.set()
            commit.wait(5)
        return row

    # The loser reads before the winner commits, so it tries to insert and blocks on the key.
    won, lost = _race(winner_inserts_and_holds, inserted, lambda: execute(client_a, tool), commit)
    assert isinstance(lost, ToolExecution), lost
    assert lost.pk == won.pk
    assert lost.status == ExecutionStatus.RUNNING  # the winner's to run, not ours
    assert hook.requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("postgres")
def test_a_second_worker_waits_for_the_running_call_instead_of_repeating_it(
    client_a: Client, tool: ClientTool, hook: FakeWebhookServer
) -> None:
    called, release = threading.Event(), threading.Event()

    def slow_backend(request: WebhookRequest) -> Reply:
        called.set()
        release.wait(5)
        return Reply.ok({"status": "cancelled"})

    hook.default(slow_backend)
    # The row is committed as running; the redelivered turn must not call the tool again.
    one, two = _race(
        lambda: execute(client_a, tool), called, lambda: execute(client_a, tool), release
    )
    assert isinstance(two, ToolExecution), two
    assert one.pk == two.pk
    assert one.status == two.status == ExecutionStatus.SUCCEEDED
    assert two.result == {"status": "cancelled"}
    assert len(hook.requests) == 1


# -- result templates ------------------------------------------------------------------------


def _finished(tool: ClientTool, result: dict[str, Any] | None, status: str) -> ToolExecution:
    return ToolExecution.objects.create(
        client=tool.client,
        tool=tool,
        params=PARAMS,
        idempotency_key=f"render-{ToolExecution.objects.unscoped('keys are global').count()}",
        status=status,
        result=result,
    )


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Order {order_id}: {result[status]}", "Order TH-12345: cancelled"),
        ("Refund {result[refund][amount]} {result[refund][currency]}", "Refund 12.50 USD"),
        ("Order {order_id}{missing} is {result[no_such_key]}.", "Order TH-12345 is ."),
        ("{{literal}} {order_id!r:>12}", "{literal}   'TH-12345'"),
        ("Order {order_id", None),  # malformed
        ("Order {0}", None),  # positional
        ("{result[status][9]}", None),  # index out of range
        ("{result.__class__.__init__.__globals__}", None),  # attribute access
        ("{order_id.__class__}", None),
        ("{order_id:>999999999}", None),  # absurd width
        ("{order_id:{result}}", None),  # nested field in the format spec
    ],
)
def test_render_result_template(client_a: Client, template: str, expected: str | None) -> None:
    tool = ClientToolFactory(client=client_a, result_template=template)
    result = {"status": "cancelled", "refund": {"amount": "12.50", "currency": "USD"}}
    execution = _finished(tool, result, ExecutionStatus.SUCCEEDED)

    assert tool_render_result(tool=tool, params=PARAMS, execution=execution) == expected


def test_render_result_needs_a_template_and_a_success(client_a: Client) -> None:
    templated = ClientToolFactory(client=client_a, result_template="Done: {result[status]}")
    plain = ClientToolFactory(client=client_a, result_template="")
    failed = _finished(templated, None, ExecutionStatus.FAILED)
    succeeded = _finished(plain, {"status": "ok"}, ExecutionStatus.SUCCEEDED)

    # A canned "Done" after a failure would tell the customer something false.
    assert tool_render_result(tool=templated, params=PARAMS, execution=failed) is None
    assert tool_render_result(tool=plain, params=PARAMS, execution=succeeded) is None


# -- selectors -------------------------------------------------------------------------------


def test_tool_selectors_are_scoped_to_the_client(client_a: Client, client_b: Client) -> None:
    ClientToolFactory(client=client_a, name="track_shipment")
    ClientToolFactory(client=client_a, name="cancel_order")
    ClientToolFactory(client=client_a, name="legacy_lookup", enabled=False)
    ClientToolFactory(client=client_b, name="b_only")
    ClientToolFactory(client=client_b, name="cancel_order")

    assert [t.name for t in tool_list_enabled(client=client_a)] == [
        "cancel_order",
        "track_shipment",
    ]
    found = tool_get_by_name(client=client_a, name="cancel_order")
    assert found is not None
    assert found.client_id == client_a.pk
    disabled = tool_get_by_name(client=client_a, name="legacy_lookup")
    assert disabled is not None
    assert not disabled.enabled
    assert tool_get_by_name(client=client_a, name="b_only") is None


def test_tool_execution_list_newest_first_in_one_query(
    client_a: Client, client_b: Client, django_assert_num_queries: Any
) -> None:
    tool_a = ClientToolFactory(client=client_a, name="a_tool")
    tool_b = ClientToolFactory(client=client_b, name="b_tool")
    older = _finished(tool_a, {}, ExecutionStatus.SUCCEEDED)
    newer = _finished(tool_a, {}, ExecutionStatus.FAILED)
    _finished(tool_b, {}, ExecutionStatus.SUCCEEDED)

    with django_assert_num_queries(1):
        rows = [(e.pk, e.tool.name) for e in tool_execution_list(client=client_a)]

    assert rows == [(newer.pk, "a_tool"), (older.pk, "a_tool")]
