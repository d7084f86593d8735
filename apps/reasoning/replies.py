"""Reply parsing: a model's text → the step's pydantic model, tolerating the usual drift.

The gateway (`llm/`) sends and receives; this module only reads what came back. It locates the
JSON object itself (the `<assessment>` block, code fences, the first balanced object in prose)
and leaves the repair of near-JSON — `//` and `/* */` comments, trailing commas — to
`json_repair`. A reply that cannot be read raises `InvalidReply`; the gateway turns it into an
`LLMError(kind="invalid_output")`.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

import json_repair
from pydantic import BaseModel, ValidationError

__all__ = ["InvalidReply", "pydantic_model", "reply_parse"]

_ASSESSMENT_RE = re.compile(r"<assessment>(.*?)(?:</assessment>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[\w+-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
_MAX_OBJECT_CANDIDATES = 32


class InvalidReply(ValueError):
    """The reply holds no JSON object, or not one that fits the step's schema."""


def reply_parse[T](step: str, text: str, output: type[T]) -> T:
    """Turn a model's text into `output`, tolerating the usual drift.

    Accepted forms, in order: a `<assessment>{json}</assessment>` block after visible text (the
    seed's plain-text form: `response` becomes the visible text unless the JSON has its own
    non-empty `response`); JSON inside a code fence; a bare JSON object; the first balanced JSON
    object embedded in prose. `//` comments and trailing commas are forgiven. Extra keys and
    type drift are handled by the pydantic models. Raises `InvalidReply`.
    """
    model = pydantic_model(output)
    stripped = text.strip()
    if not stripped:
        raise InvalidReply("the model returned an empty reply")

    visible: str | None = None
    block = _ASSESSMENT_RE.search(stripped)
    if block is not None:
        visible = (stripped[: block.start()] + stripped[block.end() :]).strip()
        data = _extract_object(block.group(1))
    else:
        data = _extract_object(stripped)
    if data is None:
        raise InvalidReply("no JSON object found in the reply")

    if visible is not None and "response" in model.model_fields:
        own = data.get("response")
        if not (isinstance(own, str) and own.strip()):
            data = {**data, "response": visible}

    try:
        return cast(T, model.model_validate(data))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(root)'}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidReply(f"reply does not match the {step!r} schema: {problems}") from exc


def pydantic_model(output: type[Any]) -> type[BaseModel]:
    if isinstance(output, type) and issubclass(output, BaseModel):
        return output
    raise TypeError(f"output must be a pydantic model class, not {output!r}")


def _extract_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`: inside code fences first, then anywhere in it."""
    chunks = [match.group(1) for match in _FENCE_RE.finditer(text)]
    chunks.append(text)
    for chunk in chunks:
        found = _first_object(chunk)
        if found is not None:
            return found
    return None


def _first_object(text: str) -> dict[str, Any] | None:
    position = 0
    for _ in range(_MAX_OBJECT_CANDIDATES):
        start = text.find("{", position)
        if start < 0:
            return None
        end = _balanced_end(text, start)
        if end is None:
            # Unbalanced (typically a truncated reply). Do not fall back to an inner object:
            # `{"response": …, "tool_params": {…}` must not parse as the tool params.
            return None
        loaded = _loads_lenient(text[start:end])
        if isinstance(loaded, dict):
            return loaded
        position = end  # skip the whole candidate, never its nested objects
    return None


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the `}` closing the `{` at `start` (string-aware), or None."""
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _loads_lenient(candidate: str) -> Any:
    """Strict JSON first; then near-JSON repaired by `json_repair` (the seed's prompt shows the
    assessment JSON with `// …` comments, and models copy them). Only a balanced candidate
    gets here, so the repair never completes a truncated reply; a placeholder such as
    `{order_id}` does not repair into an object and is skipped."""
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    try:
        return json_repair.loads(candidate, skip_json_loads=True)
    except ValueError:
        return None
