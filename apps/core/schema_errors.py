"""One translator of JSON Schema errors (the `jsonschema` library) into what people read: field
path → message. Business info, simulation cases, tool executors' settings (the tenant file and
the tool admin) and a tool call's params are all checked through it.

`schema_problems` walks a validator's errors once, in path order, and makes one
`SchemaProblem` per place: a `required` error per missing key and an `additionalProperties`
error per unexpected key (at that key's path), an `anyOf` error as the errors of the branch the
value was meant for when exactly one branch has its JSON type. `errors_by_path` keeps the first
message per path, worded by `WORDS` (translated) or a caller's own words for a keyword (a
caller's `"*"` is asked first for every problem)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

__all__ = [
    "WORDS",
    "SchemaProblem",
    "errors_by_path",
    "json_path",
    "schema_problems",
    "type_label",
]

type PathPart = str | int


def json_path(parts: Any) -> str:
    """['faqs', 2, 'answer'] -> 'faqs[2].answer'"""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class SchemaProblem:
    """One problem: `at` is where jsonschema found it, `key` the missing or unexpected key
    (`required`, `additionalProperties`; else None), `keyword` the failed keyword and `error`
    jsonschema's error (`validator_value`, `instance`, `schema`, `message`)."""

    at: tuple[PathPart, ...]
    keyword: str
    error: ValidationError
    key: str | None = None

    @property
    def path(self) -> tuple[PathPart, ...]:
        return (*self.at, self.key) if self.key is not None else self.at

    @property
    def value(self) -> Any:
        return self.error.validator_value


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


def _fits_type(instance: Any, kind: Any) -> bool:
    if not isinstance(kind, str):
        return True  # a branch with no type (any JSON) fits anything
    if isinstance(instance, bool) and kind in ("integer", "number"):
        return False
    return isinstance(instance, _JSON_TYPES.get(kind, ()))


def _meant_branch(error: ValidationError, resolve: Callable[[Any], dict[str, Any]]) -> list[Any]:
    """The errors of the one `anyOf` branch of the value's JSON type, or [] (none or several)."""
    branches = [resolve(b) for b in error.validator_value]
    fitting = [i for i, b in enumerate(branches) if _fits_type(error.instance, b.get("type"))]
    if len(fitting) != 1 or not error.context:
        return []
    return [e for e in error.context if e.relative_schema_path[0] == fitting[0]]


def _expand(
    error: ValidationError, resolve: Callable[[Any], dict[str, Any]]
) -> Iterator[SchemaProblem]:
    at = tuple(error.absolute_path)
    keyword = str(error.validator)
    if keyword == "required":
        for key in error.validator_value:
            if isinstance(error.instance, dict) and key not in error.instance:
                yield SchemaProblem(at, keyword, error, str(key))
    elif keyword == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {})
        for key in sorted(set(error.instance) - set(allowed)):
            yield SchemaProblem(at, keyword, error, str(key))
    elif keyword == "anyOf" and (inner := _meant_branch(error, resolve)):
        for sub in inner:
            yield from _expand(sub, resolve)
    else:
        yield SchemaProblem(at, keyword, error)


def _no_refs(schema: Any) -> dict[str, Any]:
    return schema if isinstance(schema, dict) else {}


def schema_problems(
    validator: Draft202012Validator,
    instance: Any,
    *,
    resolve: Callable[[Any], dict[str, Any]] = _no_refs,
    in_path_order: bool = True,
) -> list[SchemaProblem]:
    """Every problem of `instance`, once per (path, keyword, key): in path order, or in the
    order jsonschema finds them (the schema's). `resolve` turns an `anyOf` branch that is a
    `$ref` into its schema."""
    errors = list(validator.iter_errors(instance))
    if in_path_order:
        errors.sort(key=lambda e: list(map(str, e.absolute_path)))
    seen: set[tuple[Any, ...]] = set()
    found: list[SchemaProblem] = []
    for error in errors:
        for problem in _expand(error, resolve):
            mark = (problem.path, problem.keyword, problem.key)
            if mark not in seen:
                seen.add(mark)
                found.append(problem)
    return found


def type_label(name: str) -> str:
    """A JSON type in words: "a whole number", "a text"."""
    return {
        "object": _("an object"),
        "array": _("a list"),
        "string": _("a text"),
        "boolean": _("true or false"),
        "integer": _("a whole number"),
        "number": _("a number"),
        "null": _("null"),
    }.get(name, name)


def _unknown_field(problem: SchemaProblem) -> str:
    allowed = ", ".join(sorted(problem.error.schema.get("properties", {})))
    return _("Unknown field. Allowed here: %(allowed)s.") % {"allowed": allowed}


def _any_of(problem: SchemaProblem) -> str:
    labels: list[str] = []
    for branch in problem.value:
        label = type_label(str(_no_refs(branch).get("type", "")))
        if label not in labels:
            labels.append(label)
    return _("Must be %(options)s.") % {"options": _(" or ").join(labels)}


# keyword → its message; a caller's "*" is asked first for every problem (None: not its own).
type Words = Mapping[str, Callable[[SchemaProblem], str | None]]

# The words for each failed keyword (a keyword not here: jsonschema's own message).
WORDS: Words = {
    "required": lambda p: _("This field is required."),
    "additionalProperties": _unknown_field,
    "anyOf": _any_of,
    "type": lambda p: _("Must be %(type)s.") % {"type": type_label(str(p.value))},
    "maxLength": lambda p: _("At most %(n)d characters.") % {"n": p.value},
    "minLength": lambda p: _("Must not be empty."),
    "maxItems": lambda p: _("At most %(n)d items.") % {"n": p.value},
    "minItems": lambda p: _("At least %(n)d item(s).") % {"n": p.value},
    "minimum": lambda p: _("At least %(n)s.") % {"n": p.value},
    "maximum": lambda p: _("At most %(n)s.") % {"n": p.value},
    "enum": lambda p: (
        _("Must be one of %(options)s.") % {"options": ", ".join(repr(v) for v in p.value)}
    ),
    "pattern": lambda p: _("Not in the expected form."),
}


def errors_by_path(
    validator: Draft202012Validator,
    instance: Any,
    *,
    words: Words | None = None,
    root: str = "",
    where: Callable[[SchemaProblem], str] | None = None,
    resolve: Callable[[Any], dict[str, Any]] = _no_refs,
) -> dict[str, str]:
    """Field path (`json_path`, or the caller's `where`) → the first problem's message; the
    instance itself is `root`. `words` replace `WORDS` for the keywords they name."""
    chosen = {**WORDS, **(words or {})}
    first = chosen.get("*")
    errors: dict[str, str] = {}
    for problem in schema_problems(validator, instance, resolve=resolve):
        place = where(problem) if where is not None else json_path(problem.path)
        message = first(problem) if first is not None else None
        if message is None:
            describe = chosen.get(problem.keyword)
            message = describe(problem) if describe is not None else None
        errors.setdefault(place or root, problem.error.message if message is None else message)
    return errors
