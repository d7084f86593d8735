"""The one JSON parser of every API endpoint (settings `DEFAULT_PARSER_CLASSES`, the staff and
widget base views). On top of DRF's it refuses, as a 400 `parse_error` before any view code runs:

- nesting deeper than `MAX_DEPTH` (a 40 KB body of 20,000 brackets used to exhaust the
  interpreter's recursion limit — a 500 — and anything a little shallower would do so later, in
  a serializer, a JSONField or a JSON Schema validator);
- a lone UTF-16 surrogate (`"\\ud800"`) or a NUL character anywhere in a string or a key: neither
  can be stored in PostgreSQL text, and no honest client sends one (a 400 `invalid` naming the
  field, e.g. `{"text": "Must not contain NUL characters."}`);
- numbers that are not finite (`1e400` → infinity) or integers beyond 64 bits, which no field of
  ours holds and PostgreSQL refuses;
- bodies that are not UTF-8.

A body larger than Django's `DATA_UPLOAD_MAX_MEMORY_SIZE` is refused by Django itself
(`RequestDataTooBig`), which the shared exception handler turns into a JSON 413.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError

# Deeper than any body of ours (a tool's JSON Schema parameters are a handful of levels).
MAX_DEPTH = 32
# PostgreSQL's bigint; no field of ours holds more.
MAX_INT = 2**63 - 1
_FORBIDDEN = re.compile("[\x00\ud800-\udfff]")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"Number {text[:20]!r} is too large.")
    return value


def _parse_int(text: str) -> int:
    if len(text) > 20:  # cheaper than int() on thousands of digits
        raise ValueError("Integer is too large.")
    value = int(text)
    if abs(value) > MAX_INT:
        raise ValueError("Integer is too large.")
    return value


def _parse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON.")


class UnsafeString(ValueError):
    """A string or key holds a NUL or a lone surrogate; `path` says where (`a.b.0`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path or "non_field_errors"
        self.message = message


def _string_problem(value: str) -> str | None:
    found = _FORBIDDEN.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "Must not contain NUL characters."
    return "Must not contain lone surrogates (invalid Unicode)."


def check_json_value(data: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise ValueError if `data` (parsed JSON) nests deeper than `max_depth`, UnsafeString if
    a string or key holds a NUL or a lone surrogate. Iterative: safe on any depth."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            problem = _string_problem(value)
            if problem:
                raise UnsafeString(path, problem)
        elif isinstance(value, dict | list):
            if depth > max_depth:
                raise ValueError(f"JSON nests deeper than {max_depth} levels.")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                key_path = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and (problem := _string_problem(key)):
                    raise UnsafeString(path, f"Keys: {problem[0].lower()}{problem[1:]}")
                stack.append((item, depth + 1, key_path))


def loads(text: str) -> Any:
    """Parse `text` with every rule above; ValueError says what is wrong."""
    try:
        data = json.loads(
            text,
            parse_constant=_parse_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except RecursionError:
        raise ValueError(f"JSON nests deeper than {MAX_DEPTH} levels.") from None
    check_json_value(data)
    return data


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = read_body(stream)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - the body is not valid {encoding}.") from exc
        try:
            return loads(text)
        except UnsafeString as exc:
            # a 400 naming the field, like any other invalid value
            raise ValidationError({exc.path: exc.message}) from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


def read_body(stream: Any) -> bytes:
    """The whole body, at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes (Django checks the declared
    Content-Length when the body is read through `request.body`; a stream read directly, as DRF
    does, is checked here — also when the length was not declared)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    raw: bytes = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(raw) > limit:
        raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
    return raw
