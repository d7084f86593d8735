"""How a tool runs: one `Executor` per type, collected in a registry.

Every executor type lives in one module of this package and registers itself with `@register`;
the package imports its modules on first use, so adding a type = adding a module (and the
migration Django asks for, since the choices of `ClientTool.executor_type` change). Everything
that used to branch on the type — `ClientTool.is_configured`, `tool_execute`, the admin form, the
tenant importer, the API's enum — asks the registry instead.

An executor never raises for a tool failure and never touches `ToolExecution`: `run` returns an
`ExecutorOutcome` that `services.tool_execute` records.
"""

from __future__ import annotations

import builtins
import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from apps.clients.models import Client
    from apps.tools.models import ClientTool, ToolExecution


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
    # True when the run ended because its time ran out (the tool's own limit or the turn's).
    timed_out: bool = False


class ImportSpec(BaseModel):
    """The base of an executor's object in the tenant file (`tools[].executor`)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Executor(ABC):
    """One way to run a tool. Subclasses set the class attributes and register themselves."""

    type: ClassVar[str]  # the value of ClientTool.executor_type (≤ 10 characters)
    label: ClassVar[str]  # shown in the admin
    # The ClientTool columns this executor reads, with their value when another type is chosen.
    settings_blank: ClassVar[Mapping[str, Any]]
    # Its object in the tenant file: a pydantic model with `type: Literal[<type>]`.
    import_spec: ClassVar[builtins.type[ImportSpec]]

    @abstractmethod
    def configured(self, tool: ClientTool) -> bool:
        """Whether the tool has everything this executor needs to run it."""

    @abstractmethod
    def validate(self, values: Mapping[str, Any]) -> dict[str, str]:
        """Problems with these settings (ClientTool field -> message); empty when valid."""

    @abstractmethod
    def import_values(self, spec: Any) -> dict[str, Any]:
        """The ClientTool columns for a validated `import_spec` object."""

    @abstractmethod
    def run(self, *, client: Client, tool: ClientTool, execution: ToolExecution) -> ExecutorOutcome:
        """Run the call recorded in `execution` (its params and idempotency key)."""


_REGISTRY: dict[str, Executor] = {}
_loaded = False


def register[E: type[Executor]](cls: E) -> E:
    if cls.type in _REGISTRY and type(_REGISTRY[cls.type]) is not cls:
        raise ValueError(f"executor type {cls.type!r} is registered twice")
    if len(cls.type) > 10:
        raise ValueError(f"executor type {cls.type!r} is longer than 10 characters")
    for attribute in ("label", "settings_blank", "import_spec"):
        if not hasattr(cls, attribute):
            raise TypeError(f"executor {cls.__name__} does not set {attribute}")
    _REGISTRY[cls.type] = cls()
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    _loaded = True


def executors() -> dict[str, Executor]:
    """Every registered executor, by type."""
    _load()
    return dict(_REGISTRY)


def executor_for(executor_type: str) -> Executor | None:
    _load()
    return _REGISTRY.get(executor_type)


def executor_choices() -> list[tuple[str, str]]:
    """The choices of `ClientTool.executor_type` (a callable, so a new module is picked up)."""
    return [(e.type, e.label) for e in executors().values()]


def settings_fields() -> list[str]:
    """Every ClientTool column some executor reads, in registry order."""
    fields: list[str] = []
    for executor in executors().values():
        fields.extend(f for f in executor.settings_blank if f not in fields)
    return fields


def settings_for(executor_type: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings columns for a tool of `executor_type`: `values` for its own, blanks for
    every other executor's."""
    blanks: dict[str, Any] = {}
    for other in executors().values():
        if other.type != executor_type:
            blanks |= dict(other.settings_blank)
    return blanks | dict(values)
