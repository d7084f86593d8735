"""What an LLM step is: a name, a prompt builder, a pydantic output model (the JSON Schema asked
for with `response_format` is derived from it), the step's own facts for the offline demo model
and the offline demo's answer. A step missing any part fails when its module is imported."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Out",
    "Step",
    "StepDefinitionError",
    "UnknownStep",
    "response_schema",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")  # fits ReasoningStep.name / UsageRecord.step
# The JSON Schema keywords a step's schema keeps: what OpenAI-compatible structured-output
# endpoints accept (pydantic's `title`/`default`, and keywords such as `minLength` that strict
# modes reject, are left out; the pydantic model still validates them on the reply).
_KEEP = ("type", "enum", "description", "minimum", "maximum")


class StepDefinitionError(TypeError):
    """A step is missing a part or declares one wrongly (raised when its module is imported)."""


class UnknownStep(LookupError):
    """No step of that name is registered."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no LLM step named {name!r} is registered (apps/reasoning/steps/)")
        self.name = name


class Out(BaseModel):
    """Base of every step's output model: tolerant of extra keys, because models drift."""

    model_config = ConfigDict(extra="ignore")


def _property(spec: dict[str, Any], where: str) -> dict[str, Any]:
    if "$ref" in spec or "allOf" in spec:
        raise StepDefinitionError(f"{where}: nested models are not supported in a step's output")
    options = spec.get("anyOf")
    if options is not None:
        # `str | None` → {"type": ["string", "null"]}: one schema, the form every provider reads.
        types: list[str] = []
        merged: dict[str, Any] = {}
        for option in options:
            kind = option.get("type")
            if not isinstance(kind, str) or set(option) - {"type"} - set(_KEEP) - {"items"}:
                raise StepDefinitionError(f"{where}: only unions of plain types are supported")
            types.append(kind)
            merged.update({k: v for k, v in option.items() if k != "type"})
        spec = {**merged, **{k: v for k, v in spec.items() if k != "anyOf"}, "type": types}
    out = {key: spec[key] for key in _KEEP if key in spec}
    if "type" not in out and "enum" not in out:
        raise StepDefinitionError(f"{where}: every output field needs a JSON type")
    items = spec.get("items")
    if isinstance(items, dict):
        out["items"] = _property(items, f"{where}[]")
    return out


def response_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema requested for `model`: one flat object, every field listed in
    `required` (structured-output endpoints ask for that), no titles or defaults."""
    raw = model.model_json_schema()
    if raw.get("$defs"):
        raise StepDefinitionError(f"{model.__name__}: nested models are not supported")
    properties = {
        name: _property(spec, f"{model.__name__}.{name}")
        for name, spec in raw.get("properties", {}).items()
    }
    if not properties:
        raise StepDefinitionError(f"{model.__name__} declares no fields")
    return {"type": "object", "properties": properties, "required": list(properties)}


@dataclass(frozen=True)
class Step[T: BaseModel]:
    """One LLM step. Declared once, in its own module under `apps/reasoning/steps/`, as
    `STEP = Step(...)`; the registry (`apps.reasoning.steps`) finds it there.

    * `prompt(**facts) -> str` builds the step's system prompt;
    * `output` validates the reply, and `schema` (derived from it) is what is requested;
    * `hint(**facts) -> dict` is what the step tells the offline demo model beyond the turn's
      common facts (real models read the prompt);
    * `offline(hint) -> dict` is the offline demo model's answer (the step's JSON).
    """

    name: str
    output: type[T]
    prompt: Callable[..., str]
    hint: Callable[..., dict[str, Any]]
    offline: Callable[[dict[str, Any]], dict[str, Any]]
    description: str
    schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise StepDefinitionError(
                f"step name {self.name!r} must be lower_snake_case, at most 40 characters"
            )
        if not (isinstance(self.output, type) and issubclass(self.output, BaseModel)):
            raise StepDefinitionError(f"step {self.name!r}: output must be a pydantic model")
        for part in ("prompt", "hint", "offline"):
            if not callable(getattr(self, part)):
                raise StepDefinitionError(f"step {self.name!r}: {part} must be callable")
        if len(inspect.signature(self.offline).parameters) != 1:
            raise StepDefinitionError(f"step {self.name!r}: offline(hint) takes one argument")
        if not (isinstance(self.description, str) and self.description.strip()):
            raise StepDefinitionError(f"step {self.name!r}: a description is required")
        object.__setattr__(self, "schema", response_schema(self.output))
