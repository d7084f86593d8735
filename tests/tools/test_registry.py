"""Executors as a registry. Every type lives in one module of apps.tools.executors;
the model's choices, `is_configured`, `tool_execute`, the admin form, the importer and the API
all ask the registry, so a type added in one module is picked up everywhere. Each executor
declares its settings as a JSON Schema: it validates the tenant import and generates the admin
form's executor rows."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.urls import reverse
from jsonschema import Draft202012Validator

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.provisioning.importer import executor_errors
from apps.provisioning.services import tenant_import
from apps.tools import executors as registry
from apps.tools.executors import Executor, ExecutorOutcome
from apps.tools.models import ClientTool, ExecutionStatus, FailureKind
from apps.tools.services import tool_execute
from tests.factories import ClientToolFactory
from tests.support.packages import importable, write_package
from tests.support.tenant_files import one_client_tenant

TYPES = list(registry.executors())
# Form rows of the tool admin that are not an executor's settings.
TOOL_ROWS = {
    "client",
    "name",
    "description",
    "kind",
    "enabled",
    "parameters",
    "display_name",
    "labels",
    "executor_type",
    "result_template",
    "approval_rule",
    "precondition",
    "customer_scoped",
    "generate_secret",
    "generate_rotation_secret",
    "rotation",
}


def test_the_shipped_executors_are_registered():
    found = registry.executors()
    assert set(found) >= {"webhook", "builtin"}
    field = ClientTool._meta.get_field("executor_type")
    assert [value for value, _ in field.choices] == list(found)
    expected: list[str] = []
    for executor in found.values():
        expected += [c for c in executor.columns().values() if c not in expected]
    assert registry.settings_fields() == expected


@pytest.mark.parametrize("executor_type", TYPES)
def test_every_executor_declares_a_valid_settings_schema_stored_in_columns(executor_type):
    executor = registry.executor_for(executor_type)
    assert executor is not None and executor.label
    schema = executor.settings_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["properties"]
    assert set(schema.get("required", [])) <= set(schema["properties"])
    columns = {f.name for f in ClientTool._meta.get_fields()}
    for name, spec in schema["properties"].items():
        assert spec["x-column"] in columns, name
        assert spec.get("title"), name
        if "default" in spec:
            Draft202012Validator({**spec}).validate(spec["default"])


def test_settings_of_other_types_are_blanked():
    assert registry.settings_for("builtin", {"builtin_handler": "demo.cancel_order"}) == {
        "webhook_url": "",
        "signing_secret": "",
        "rotation_secret": "",
        "mcp_tool_name": "",
        "builtin_handler": "demo.cancel_order",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("executor_type", TYPES)
def test_the_admin_form_shows_exactly_the_executors_settings(admin_client, executor_type):
    executor = registry.executor_for(executor_type)
    assert executor is not None
    response = admin_client.get(reverse("admin:tools_clienttool_add"))
    form = response.context["adminform"].form
    page = response.content.decode()
    # The executor rows are the registered executors' settings columns, nothing else.
    assert set(form.fields) - TOOL_ROWS == set(registry.settings_fields())
    for spec in executor.properties().values():
        field = form.fields[spec["x-column"]]
        assert field.label == spec["title"]
        assert f'name="{spec["x-column"]}"' in page
        if spec.get("writeOnly"):
            assert field.widget.input_type == "password"
        if "enum" in spec:
            assert [v for v, _ in field.choices if v] == spec["enum"]


def _tenant_with(executor: dict[str, Any]) -> dict[str, Any]:
    tool = {"name": "t", "description": "A tool.", "kind": "read", "executor": executor}
    return one_client_tenant("c", tools=[tool])


def _import_errors(executor: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ApplicationError) as caught:
        tenant_import(data=_tenant_with(executor))
    assert not ClientTool.objects.unscoped("test checks the database directly").exists()
    return dict(caught.value.extra["fields"])


WHERE = "clients[0].tools[0].executor"


@pytest.mark.django_db
@pytest.mark.parametrize("executor_type", TYPES)
def test_the_import_refuses_an_entry_violating_the_executor_s_schema(executor_type):
    executor = registry.executor_for(executor_type)
    assert executor is not None
    schema = executor.settings_schema()
    entry: dict[str, Any] = {"type": executor_type}

    assert set(_import_errors({**entry, "bogus": 1})) >= {WHERE}
    for name in schema.get("required", []):
        assert name in executor_errors(entry)
        assert f"{WHERE}.{name}" in _import_errors(entry)
    for name in schema["properties"]:
        wrong = copy.deepcopy(entry) | {name: [1, 2]}  # no setting is an array
        assert f"{WHERE}.{name}" in _import_errors(wrong)
    assert _import_errors({"type": "no_such_type"}) == {
        f"{WHERE}.type": f"must be one of: {', '.join(TYPES)}"
    }


class EchoExecutor(Executor):
    """A type a test adds: it answers with its params, or raises what `raises` says."""

    type = "echo"
    label = "Echo (tests)"
    raises: ClassVar[BaseException | None] = None

    def settings_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "default": 5,
                    "title": "Timeout (seconds)",
                    "x-column": "timeout_seconds",
                }
            },
        }

    def configured(self, tool: ClientTool) -> bool:
        return True

    def run(self, *, client: Any, tool: ClientTool, execution: Any) -> ExecutorOutcome:
        if self.raises is not None:
            raise self.raises
        return ExecutorOutcome(
            ok=True, result={"echo": execution.params}, error="", attempts=1, latency_ms=0
        )


@pytest.fixture
def echo() -> Iterator[type[EchoExecutor]]:
    registry.register(EchoExecutor())
    yield EchoExecutor
    registry.unregister(EchoExecutor.type)
    EchoExecutor.raises = None


@pytest.mark.django_db
def test_a_type_added_in_one_module_is_picked_up_everywhere(echo, client_a):
    assert ("echo", "Echo (tests)") in ClientTool._meta.get_field("executor_type").choices
    tool = ClientToolFactory(client=client_a, executor_type="echo", webhook_url="")
    assert tool.is_configured
    execution = tool_execute(client=client_a, tool=tool, params={"a": 1}, idempotency_key="k-1")
    assert execution.status == ExecutionStatus.SUCCEEDED
    assert execution.result == {"echo": {"a": 1}}
    # the importer's `executor` object is checked against its schema too
    assert executor_errors({"type": "echo"}) == {}
    assert set(executor_errors({"type": "echo", "timeout": 0})) == {"timeout"}
    tenant_import(data=_tenant_with({"type": "echo"}))
    imported = ClientTool.objects.for_client(Client.objects.get(slug="c")).get(name="t")
    assert (imported.executor_type, imported.timeout_seconds) == ("echo", 5.0)  # the default


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("raised", "kind"),
    [(SoftTimeLimitExceeded(), FailureKind.TIMED_OUT), (RuntimeError("bug"), FailureKind.ERROR)],
)
def test_an_executor_that_raises_never_leaves_the_execution_running(echo, client_a, raised, kind):
    """A ToolExecution is never left `running` — a time limit or a bug inside an
    executor is recorded, and the row is finished."""
    echo.raises = raised
    tool = ClientToolFactory(client=client_a, executor_type="echo", webhook_url="")
    execution = tool_execute(client=client_a, tool=tool, params={}, idempotency_key="k-2")
    execution.refresh_from_db()
    assert execution.status == ExecutionStatus.FAILED
    assert execution.failure_kind == kind


def _echo_with_schema(executor_type: str, schema: dict[str, Any]) -> Any:
    """An echo executor of another type whose settings schema is `schema`."""
    return type(
        "Echo_" + executor_type,
        (EchoExecutor,),
        {"type": executor_type, "settings_schema": lambda self: schema},
    )()


def test_registering_an_incomplete_or_duplicate_type_fails(echo):
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(type("Webhook2", (EchoExecutor,), {"type": "webhook"})())
    with pytest.raises(ValueError, match="longer than 10"):
        registry.register(type("Long", (EchoExecutor,), {"type": "x" * 11})())
    no_column = {"type": "object", "properties": {"x": {"type": "string"}}}
    with pytest.raises(TypeError, match="no x-column"):
        registry.register(_echo_with_schema("nocol", no_column))
    invalid = {"type": "object", "properties": {"x": {"type": "strange", "x-column": "name"}}}
    with pytest.raises(TypeError, match="invalid settings schema"):
        registry.register(_echo_with_schema("invalid", invalid))


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    with importable(tmp_path, "extra_executors_") as root:
        yield root


@pytest.mark.django_db
def test_an_executor_module_added_to_a_package_is_discovered_and_runs_its_tools(on_path, client_a):
    """Executors are discovered like steps and modes: a module that declares `EXECUTOR` is
    registered (an underscore module is a helper), and a tool whose executor type names it
    runs through it."""
    write_package(
        on_path,
        "extra_executors_pkg",
        {
            "_helpers": "VALUE = 1\n",
            "echo": "from tests.tools.test_registry import EchoExecutor\n"
            "EXECUTOR = EchoExecutor()\n",
        },
    )
    try:
        found = registry.discover("extra_executors_pkg")
        assert [e.type for e in found] == ["echo"]
        assert registry.executor_for("echo") is found[0]
        assert ("echo", "Echo (tests)") in ClientTool._meta.get_field("executor_type").choices
        tool = ClientToolFactory(client=client_a, executor_type="echo", webhook_url="")
        execution = tool_execute(client=client_a, tool=tool, params={"b": 2}, idempotency_key="k")
        assert execution.result == {"echo": {"b": 2}}
    finally:
        registry.unregister("echo")


def test_an_executor_module_without_an_executor_fails_discovery(on_path):
    write_package(on_path, "extra_executors_broken", {"half": "LABEL = 'no EXECUTOR here'\n"})
    with pytest.raises(ValueError, match="defines no EXECUTOR"):
        registry.discover("extra_executors_broken")
