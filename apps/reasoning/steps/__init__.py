"""The LLM steps, one module each (`respond`, `assess`, `critique`, `compose`, …), and their
registry.

Adding a step means adding one module here that defines `STEP = Step(...)` (see `_base.Step`):
its name, prompt builder, output model (the requested JSON Schema is derived from it), its
facts for the offline demo model and the offline demo's answer. Modules whose name starts with
`_` are helpers, not steps. Every other module is imported when this package is, and one that
does not define a complete `STEP` fails that import. The gateway (`apps.reasoning.llm`) and the
offline demo model look steps up here; an unknown step is an error."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from apps.reasoning.steps._base import (
    Out,
    Step,
    StepDefinitionError,
    UnknownStep,
    response_schema,
)

__all__ = [
    "SCHEMAS",
    "Out",
    "Step",
    "StepDefinitionError",
    "UnknownStep",
    "discover",
    "get",
    "names",
    "register",
    "response_schema",
    "unregister",
]

_registry: dict[str, Step[Any]] = {}
_lock = threading.Lock()


def register[S: Step[Any]](step: S) -> S:
    """Add a step to the registry (discovery does this for every module of this package)."""
    if not isinstance(step, Step):
        raise StepDefinitionError(f"{step!r} is not a Step")
    with _lock:
        known = _registry.get(step.name)
        if known is not None and known is not step:
            raise StepDefinitionError(f"two steps are named {step.name!r}")
        _registry[step.name] = step
    return step


def unregister(name: str) -> None:
    """Remove a step (for tests that register one of their own)."""
    with _lock:
        _registry.pop(name, None)


def get(name: str) -> Step[Any]:
    try:
        return _registry[name]
    except KeyError:
        raise UnknownStep(name) from None


def names() -> list[str]:
    return sorted(_registry)


def discover(package: str) -> list[Step[Any]]:
    """Import every non-underscore module of `package` and register its `STEP`."""
    found: list[Step[Any]] = []
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(module.__path__):
        if info.name.startswith("_"):
            continue
        submodule = importlib.import_module(f"{package}.{info.name}")
        step = getattr(submodule, "STEP", None)
        if not isinstance(step, Step):
            raise StepDefinitionError(
                f"{submodule.__name__} defines no STEP = Step(...); helpers go in _modules"
            )
        found.append(register(step))
    return found


class _Schemas(Mapping[str, dict[str, Any]]):
    """Every registered step's requested JSON Schema, by step name (a live view)."""

    def __getitem__(self, name: str) -> dict[str, Any]:
        try:
            return _registry[name].schema
        except KeyError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(_registry)


SCHEMAS: Mapping[str, dict[str, Any]] = _Schemas()

discover(__name__)
