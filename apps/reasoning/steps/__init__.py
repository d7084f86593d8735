"""The LLM steps, one module each (`respond`, `assess`, `critique`, `compose`, …), and their
registry.

Adding a step means adding one module here that defines `STEP = Step(...)` (see `_base.Step`):
its name, prompt builder, output model (the requested JSON Schema is derived from it), its
facts for the offline demo model and the offline demo's answer. Modules whose name starts with
`_` are helpers, not steps. Every other module is imported when this package is, and one that
does not define a complete `STEP` fails that import. The gateway (`apps.reasoning.llm`) and the
offline demo model look steps up here; an unknown step is an error. `data_blocks` (`_data.py`:
untrusted text as delimited data) and the language and prefix helpers of `_shared.py` are public
for the prompt builders outside this package."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from apps.core.registry import Registry
from apps.reasoning.steps import _data as data_blocks
from apps.reasoning.steps._base import (
    Out,
    Prompt,
    Step,
    StepDefinitionError,
    UnknownStep,
    response_schema,
)
from apps.reasoning.steps._shared import language_asked, shared_prefix, with_language

__all__ = [
    "SCHEMAS",
    "Out",
    "Prompt",
    "Step",
    "StepDefinitionError",
    "UnknownStep",
    "data_blocks",
    "discover",
    "get",
    "language_asked",
    "names",
    "register",
    "response_schema",
    "shared_prefix",
    "unregister",
    "with_language",
]

_registry: Registry[Step[Any]] = Registry(
    error=StepDefinitionError,
    duplicate="two steps are named {name}",
    kind=Step,
    unknown=UnknownStep,
)


def register[S: Step[Any]](step: S) -> S:
    """Add a step to the registry (discovery does this for every module of this package)."""
    _registry.register(getattr(step, "name", ""), step)
    return step


def unregister(name: str) -> None:
    """Remove a step (for tests that register one of their own)."""
    _registry.unregister(name)


def get(name: str) -> Step[Any]:
    return _registry.require(name)


def names() -> list[str]:
    return sorted(_registry.names())


def discover(package: str) -> list[Step[Any]]:
    """Import every non-underscore module of `package` and register its `STEP`."""
    return _registry.discover(package, "STEP", register)


class _Schemas(Mapping[str, dict[str, Any]]):
    """Every registered step's requested JSON Schema, by step name (a live view)."""

    def __getitem__(self, name: str) -> dict[str, Any]:
        step = _registry.get(name)
        if step is None:
            raise KeyError(name)
        return step.schema

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(_registry)


SCHEMAS: Mapping[str, dict[str, Any]] = _Schemas()

discover(__name__)
