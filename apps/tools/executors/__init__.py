"""How a tool runs: one `Executor` per type, collected in a registry.

Every executor type lives in one module of this package that declares `EXECUTOR = …Executor()`;
the package discovers its modules when it is imported (`discover`, as the steps and the modes
are; `ToolsConfig.ready` imports it at start-up), so adding a type = adding a module (the
choices of `ClientTool.executor_type` are a callable over the registry: no migration). Modules
whose name starts with `_` are helpers; any other module without an `EXECUTOR` fails the
import. Everything that used to branch on the type — `ClientTool.is_configured`,
`tool_execute`, the admin form, the tenant importer, the API's enum — asks the registry.

An executor declares its settings once, as a JSON Schema (`settings_schema`): the object of the
tenant file's `tools[].executor` (without its `type`), each property naming the `ClientTool`
column it is stored in (`x-column`). The schema validates the tenant import's entries and the
admin form (whose executor fields are generated from it); the columns to clear when a tool
changes type are the executor's text columns. Storage stays in those columns.

An executor never raises for a tool failure and never touches `ToolExecution`: `run` returns an
`ExecutorOutcome` that `services.tool_execute` records.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from django.utils.translation import gettext_noop
from jsonschema import Draft202012Validator

from apps.core.registry import Registry
from apps.core.schema_errors import SchemaProblem, errors_by_path

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.tools.models import ClientTool, ToolExecution


# The per-call time limit every executor offers (stored in `ClientTool.timeout_seconds`).
TIMEOUT_SETTING: dict[str, Any] = {
    "type": "number",
    "exclusiveMinimum": 0,
    "maximum": 60,
    "default": 10,
    "title": gettext_noop("Timeout (seconds)"),
    "description": gettext_noop("How long to wait for your server (at most 60 seconds)."),
    "x-column": "timeout_seconds",
}


@dataclass(frozen=True)
class ExecutorOutcome:
    """What one tool run produced. `attempts` counts HTTP requests (1 for a builtin)."""

    ok: bool
    result: dict[str, Any] | None
    error: str
    attempts: int
    latency_ms: int
    # True when the run ended on a transient failure (timeout, connection error, 5xx, 429)
    # after exhausting the retries: running again later with the same key may succeed.
    retryable_failure: bool = False
    # True when the tool answered and said no (`{"ok": false}` or a builtin's ToolError): a
    # business refusal whose message is meant for the customer, not a technical failure.
    refused: bool = False
    # The refusal's code (`{"ok": false, "code": …}` or `ToolError(code=…)`), which the customer
    # is told in their language (apps/tools/wording.py); '' when none was given.
    error_code: str = ""
    # True when the run ended because its time ran out (the tool's own limit or the turn's).
    timed_out: bool = False

    @classmethod
    def not_run(cls, error: str) -> ExecutorOutcome:
        """A call refused before the tool was reached: nothing was sent or run."""
        return cls(ok=False, result=None, error=error, attempts=0, latency_ms=0)


# An outcome's error text may be shown to the customer: keep it to a sentence or two.
MAX_ERROR_CHARS = 500


def elapsed_ms(started: float) -> int:
    """Milliseconds since `started` (a `time.monotonic()` reading): an outcome's latency."""
    return int((time.monotonic() - started) * 1000)


def clip_error(text: str) -> str:
    """An error text for an outcome: stripped, and cut to MAX_ERROR_CHARS with an ellipsis."""
    text = text.strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


class Executor(ABC):
    """One way to run a tool. Subclasses set the class attributes; their module declares
    `EXECUTOR = TheExecutor()`."""

    type: ClassVar[str]  # the value of ClientTool.executor_type (≤ 10 characters)
    label: ClassVar[str]  # shown in the admin

    @abstractmethod
    def settings_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of this executor's settings: an object whose every
        property carries `x-column` (the ClientTool column that stores it) and may carry
        `title`, `description`, `default`, `writeOnly` (a secret: never shown back) and
        `x-missing` (what a missing required value is called in an error message)."""

    def check(self, settings: Mapping[str, Any]) -> dict[str, str]:
        """Problems the schema cannot express (property -> message), for settings that passed
        the schema; none by default."""
        return {}

    @abstractmethod
    def configured(self, tool: ClientTool) -> bool:
        """Whether the tool has everything this executor needs to run it."""

    @abstractmethod
    def run(self, *, client: Client, tool: ClientTool, execution: ToolExecution) -> ExecutorOutcome:
        """Run the call recorded in `execution` (its params and idempotency key)."""

    # -- what the registry derives from the schema ---------------------------------------------

    def properties(self) -> dict[str, dict[str, Any]]:
        return dict(self.settings_schema().get("properties", {}))

    def columns(self) -> dict[str, str]:
        """Property -> ClientTool column."""
        return {name: spec["x-column"] for name, spec in self.properties().items()}

    def settings_blank(self) -> dict[str, Any]:
        """The columns cleared when a tool changes to another type: this executor's text
        settings (a URL, a secret, a handler); shared numbers such as the timeout stay."""
        return {
            spec["x-column"]: ""
            for spec in self.properties().values()
            if spec.get("type") == "string"
        }

    def settings_errors(self, settings: Mapping[str, Any]) -> dict[str, str]:
        """Problems with these settings (property -> message, '' for the whole object);
        empty when valid."""
        schema = {**self.settings_schema(), "additionalProperties": False}
        errors = errors_by_path(
            Draft202012Validator(schema),
            dict(settings),
            words={"*": self._words},
            where=_setting_named,
        )
        if not errors:
            errors = self.check(settings)
        return errors

    def _words(self, problem: SchemaProblem) -> str:
        """An executor's own words for a settings problem (the tenant import's, in English)."""
        if problem.keyword == "required":
            return self._missing_message(str(problem.key))
        if problem.keyword == "additionalProperties":
            return problem.error.message
        spec = self.properties().get(_setting_named(problem), {})
        if problem.keyword == "enum":
            return f"must be one of: {', '.join(map(str, spec['enum']))}"
        if problem.keyword in ("minLength", "maxLength"):
            least = "least" if problem.keyword == "minLength" else "most"
            return f"must be at {least} {problem.value} characters"
        if spec.get("writeOnly"):  # never echo a secret back
            return f"invalid ({problem.keyword})"
        return problem.error.message

    def _missing_message(self, name: str) -> str:
        spec = self.properties()[name]
        if "enum" in spec:
            return f"A {self.type} tool needs one of: {', '.join(map(str, spec['enum']))}."
        what = spec.get("x-missing") or f"a {str(spec.get('title', name)).lower()}"
        return f"A {self.type} tool needs {what}."

    def settings_from_columns(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The settings object for ClientTool column values (empty values left out)."""
        return {
            name: values[column]
            for name, column in self.columns().items()
            if values.get(column) not in (None, "")
        }

    def column_values(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The ClientTool columns for valid settings, the schema's defaults filled in."""
        out: dict[str, Any] = {}
        for name, spec in self.properties().items():
            if name in settings:
                out[spec["x-column"]] = settings[name]
            elif "default" in spec:
                out[spec["x-column"]] = spec["default"]
        return out

    def validate(self, values: Mapping[str, Any]) -> dict[str, str]:
        """Problems with these ClientTool column values (column -> message)."""
        columns = self.columns()
        errors = self.settings_errors(self.settings_from_columns(values))
        return {columns.get(name, "executor_type"): message for name, message in errors.items()}


def _setting_named(problem: SchemaProblem) -> str:
    """The setting a problem is about ('' = the whole object, for an unknown setting)."""
    if problem.keyword == "additionalProperties" or not problem.path:
        return ""
    return str(problem.path[0])


# In registration order (module name order): the order of the admin's choices and columns.
# Registering another instance of the same class (its module imported twice) replaces it.
_REGISTRY: Registry[Executor] = Registry(
    error=ValueError,
    duplicate="executor type {name} is registered twice",
    kind=Executor,
    same=lambda known, new: type(known) is type(new),
)


def register[E: Executor](executor: E) -> E:
    """Add an executor type (discovery does this for every module of this package)."""
    if not isinstance(executor, Executor):
        raise ValueError(f"{executor!r} is not an Executor")
    if len(executor.type) > 10:
        raise ValueError(f"executor type {executor.type!r} is longer than 10 characters")
    if not getattr(executor, "label", ""):
        raise TypeError(f"executor {type(executor).__name__} does not set label")
    schema_problem(executor)
    _REGISTRY.register(executor.type, executor)
    return executor


def unregister(executor_type: str) -> None:
    """Remove an executor type (for tests that register one of their own)."""
    _REGISTRY.unregister(executor_type)


def discover(package: str) -> list[Executor]:
    """Import every non-underscore module of `package` and register its `EXECUTOR`."""
    return _REGISTRY.discover(package, "EXECUTOR", register)


def schema_problem(executor: Executor) -> None:
    """Raise TypeError unless the executor's settings schema is a valid JSON Schema object
    whose every property names an existing ClientTool column."""
    from jsonschema.exceptions import SchemaError

    schema = executor.settings_schema()
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise TypeError(
            f"executor {executor.type!r}: invalid settings schema: {exc.message}"
        ) from None
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise TypeError(f"executor {executor.type!r}: the settings schema must be an object")
    for name, spec in schema["properties"].items():
        if not isinstance(spec.get("x-column"), str):
            raise TypeError(f"executor {executor.type!r}: property {name!r} has no x-column")


def executors() -> dict[str, Executor]:
    """Every registered executor, by type."""
    return dict(_REGISTRY.items())


def executor_for(executor_type: str) -> Executor | None:
    return _REGISTRY.get(executor_type)


def executor_choices() -> list[tuple[str, str]]:
    """The choices of `ClientTool.executor_type` (a callable, so a new module is picked up)."""
    return [(e.type, e.label) for e in executors().values()]


def settings_fields() -> list[str]:
    """Every ClientTool column some executor's settings are stored in, in registry order."""
    fields: list[str] = []
    for executor in executors().values():
        fields.extend(f for f in executor.columns().values() if f not in fields)
    return fields


def settings_for(executor_type: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings columns for a tool of `executor_type`: `values` for its own, blanks for
    every other executor's text columns."""
    blanks: dict[str, Any] = {}
    for other in executors().values():
        if other.type != executor_type:
            blanks |= other.settings_blank()
    return blanks | dict(values)


discover(__name__)
