"""What an LLM step is: a name, a prompt builder, a pydantic output model (the JSON Schema asked
for with `response_format` is derived from it), the step's own facts for the offline demo model
and the offline demo's answer. A step missing any part fails when its module is imported."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Out",
    "Prompt",
    "Step",
    "StepDefinitionError",
    "UnknownStep",
    "required_text",
    "response_schema",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")  # fits ReasoningStep.name / UsageRecord.step
# The JSON Schema keywords a step's schema keeps: what OpenAI-compatible structured-output
# endpoints accept (pydantic's `title`/`default`, and keywords such as `minLength` that strict
# modes reject, are left out; the pydantic model still validates them on the reply).
# What a step is told about the reply language (see `Step.language`).
LANGUAGE_ROLES = frozenset({"", "reply", "review"})
_KEEP = ("type", "enum", "description", "minimum", "maximum")


class StepDefinitionError(TypeError):
    """A step is missing a part or declares one wrongly (raised when its module is imported)."""


class UnknownStep(LookupError):
    """No step of that name is registered."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no LLM step named {name!r} is registered (apps/reasoning/steps/)")
        self.name = name


class Prompt(list[dict[str, str]]):
    """A step's messages, and which of them may be left out when the model's context window is
    too small: `shrinkable` lists their indices in the order they go (the oldest history
    first, then the notes block). The system message (our rules and the business basics) and
    the current customer message are never among them. The gateway does the fitting
    (`apps.reasoning.llm`); a plain list has nothing shrinkable."""

    def __init__(self, messages: Iterable[dict[str, str]] = (), shrinkable: Iterable[int] = ()):
        super().__init__(messages)
        self.shrinkable: tuple[int, ...] = tuple(shrinkable)


class Out(BaseModel):
    """Base of every step's output model: tolerant of extra keys, because models drift.

    `written_last` names the field the requested schema puts last (the text the customer reads,
    for the steps whose reply may be streamed): the fields that decide what happens to it come
    first, so they are known before its first word arrives (docs/llm-protocol.md)."""

    model_config = ConfigDict(extra="ignore")
    written_last: ClassVar[str | None] = None


def required_text(value: str) -> str:
    """A text field the step's contract needs: blank is a failed reply, not an answer (use as
    an `after` field validator)."""
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _property(
    spec: dict[str, Any], where: str, defs: dict[str, Any], seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    if "allOf" in spec:
        raise StepDefinitionError(f"{where}: only plain fields and nested models are supported")
    ref = spec.get("$ref")
    if isinstance(ref, str):
        # A nested pydantic model (`topics: list[Topic]`): inlined as an object schema, so the
        # requested schema stays one self-contained document (no `$defs`, which several
        # OpenAI-compatible servers reject). A model that contains itself cannot be inlined.
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise StepDefinitionError(f"{where}: recursive models are not supported")
        if name not in defs:
            raise StepDefinitionError(f"{where}: unresolvable reference {ref!r}")
        nested = {**defs[name], **{k: v for k, v in spec.items() if k != "$ref"}}
        return _object(nested, where, defs, (*seen, name))
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
        out["items"] = _property(items, f"{where}[]", defs, seen)
    return out


def _object(
    spec: dict[str, Any], where: str, defs: dict[str, Any], seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One object level: every field listed in `required` (structured-output endpoints ask
    for that), no titles or defaults."""
    properties = {
        name: _property(field, f"{where}.{name}", defs, seen)
        for name, field in spec.get("properties", {}).items()
    }
    if not properties:
        raise StepDefinitionError(f"{where} declares no fields")
    out: dict[str, Any] = {"type": "object", "properties": properties, "required": list(properties)}
    if "description" in spec:
        out["description"] = spec["description"]
    return out


def response_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema requested for `model`: objects with every field listed in `required`
    (structured-output endpoints ask for that), no titles or defaults. Nested pydantic models
    (a list of topics, each with a proposal) are inlined; recursive ones are refused."""
    raw = model.model_json_schema()
    schema = _object(raw, model.__name__, raw.get("$defs", {}))
    schema.pop("description", None)  # the model's docstring is for readers of the code
    last = getattr(model, "written_last", None)
    if last and last in schema["properties"]:
        properties = schema["properties"]
        properties[last] = properties.pop(last)
        schema["required"] = list(properties)
    return schema


@dataclass(frozen=True)
class Step[T: BaseModel]:
    """One LLM step. Declared once, in its own module under `apps/reasoning/steps/`, as
    `STEP = Step(...)`; the registry (`apps.reasoning.steps`) finds it there.

    * `prompt(**facts) -> list[message]` builds the step's messages: a system message with
      only our rules and the business's own context, and every text GuideDesk did not write
      (customer messages, notes, drafts, tool results, source text) as delimited data blocks
      in user messages (`steps._data`; docs/llm-protocol.md, "Message layout");
    * `output` validates the reply, and `schema` (derived from it) is what is requested;
    * `hint(**facts) -> dict` is what the step tells the offline demo model beyond the turn's
      common facts (real models read the prompt);
    * `offline(hint) -> dict` is the offline demo model's answer (the step's JSON);
    * `example` is a reply a model might give (a JSON object): docs/llm-protocol.md shows it
      in the generated steps table, and a test validates it against `schema` and `output`;
    * `language` says what a turn tells the step about the reply language: `"reply"` (it
      writes text the customer reads: its system message ends with "Reply in Hebrew (he)."),
      `"review"` (it judges or guides such text: it is told the expected language) or `""`
      (neither). `Turn.llm` adds the line (`steps._shared.with_language`).
    """

    name: str
    output: type[T]
    prompt: Callable[..., list[dict[str, str]]]
    hint: Callable[..., dict[str, Any]]
    offline: Callable[[dict[str, Any]], dict[str, Any]]
    description: str
    # No default in practice: an empty example is refused (StepDefinitionError), with a
    # clearer message than a missing argument.
    example: dict[str, Any] = field(default_factory=dict)
    language: str = ""
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
        if not (isinstance(self.example, dict) and self.example):
            raise StepDefinitionError(f"step {self.name!r}: an example reply is required")
        if self.language not in LANGUAGE_ROLES:
            raise StepDefinitionError(
                f"step {self.name!r}: language must be one of {sorted(LANGUAGE_ROLES)}"
            )
        object.__setattr__(self, "schema", response_schema(self.output))
