"""Executors as a registry. Every type lives in one module of apps.tools.executors;
the model's choices, `is_configured`, `tool_execute`, the admin form, the importer and the API
all ask the registry, so a type added in one module is picked up everywhere."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from pydantic import TypeAdapter

from apps.provisioning.importer import _executor_specs
from apps.tools import executors as registry
from apps.tools.executors import Executor, ExecutorOutcome, ImportSpec
from apps.tools.models import ClientTool, ExecutionStatus, FailureKind
from apps.tools.services import tool_execute
from tests.factories import ClientToolFactory


def test_the_shipped_executors_are_registered_with_every_part():
    found = registry.executors()
    assert set(found) == {"webhook", "builtin"}
    for executor in found.values():
        assert executor.label and executor.settings_blank
        assert issubclass(executor.import_spec, ImportSpec)
        assert executor.import_spec.model_fields["type"].annotation == Literal[executor.type]
    field = ClientTool._meta.get_field("executor_type")
    assert [value for value, _ in field.choices] == list(found)
    assert registry.settings_fields() == [
        "webhook_url",
        "signing_secret",
        "rotation_secret",
        "builtin_handler",
    ]


def test_settings_of_other_types_are_blanked():
    assert registry.settings_for("builtin", {"builtin_handler": "demo.cancel_order"}) == {
        "webhook_url": "",
        "signing_secret": "",
        "rotation_secret": "",
        "builtin_handler": "demo.cancel_order",
    }


class EchoIn(ImportSpec):
    type: Literal["echo"]
    timeout: float = 5


class EchoExecutor(Executor):
    """A type a test adds: it answers with its params, or raises what `raises` says."""

    type = "echo"
    label = "Echo (tests)"
    settings_blank: ClassVar[Mapping[str, Any]] = {"builtin_handler": ""}
    import_spec = EchoIn
    raises: ClassVar[BaseException | None] = None

    def configured(self, tool: ClientTool) -> bool:
        return True

    def validate(self, values: Mapping[str, Any]) -> dict[str, str]:
        return {}

    def import_values(self, spec: Any) -> dict[str, Any]:
        return {}

    def run(self, *, client: Any, tool: ClientTool, execution: Any) -> ExecutorOutcome:
        if self.raises is not None:
            raise self.raises
        return ExecutorOutcome(
            ok=True, result={"echo": execution.params}, error="", attempts=1, latency_ms=0
        )


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[EchoExecutor]]:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register(EchoExecutor)
    yield EchoExecutor
    EchoExecutor.raises = None


@pytest.mark.django_db
def test_a_type_added_in_one_module_is_picked_up_everywhere(echo, client_a):
    assert ("echo", "Echo (tests)") in ClientTool._meta.get_field("executor_type").choices
    tool = ClientToolFactory(client=client_a, executor_type="echo", webhook_url="")
    assert tool.is_configured
    execution = tool_execute(client=client_a, tool=tool, params={"a": 1}, idempotency_key="k-1")
    assert execution.status == ExecutionStatus.SUCCEEDED
    assert execution.result == {"echo": {"a": 1}}
    # the importer's `executor` object is built from the registry too
    assert isinstance(TypeAdapter(_executor_specs()).validate_python({"type": "echo"}), EchoIn)


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


def test_registering_an_incomplete_or_duplicate_type_fails():
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(type("Webhook2", (EchoExecutor,), {"type": "webhook"}))
    with pytest.raises(ValueError, match="longer than 10"):
        registry.register(type("Long", (EchoExecutor,), {"type": "x" * 11}))
