"""How the step's JSON is asked for (`RESPONSE_FORMS`, most constrained first) and what each
provider accepts (detected on refusal; remembered per base URL and model)."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

import openai
from django.conf import settings
from django.core.cache import cache

from apps.reasoning import replies, steps
from apps.reasoning.llm.client import llm_model
from apps.reasoning.llm.window import estimate_tokens

logger = logging.getLogger("apps.reasoning.llm")


# How the step's JSON is asked for, most constrained first. A provider that refuses one form
# (docs/llm-protocol.md, "Response format detection") gets the next within the same call.
ResponseForm = Literal["json_schema", "json_object+schema", "json_object", "text"]
RESPONSE_FORMS: tuple[ResponseForm, ...] = (
    "json_schema",
    "json_object+schema",
    "json_object",
    "text",
)
AUTO = "auto"  # LLM_RESPONSE_FORMAT's default: start at json_schema


# A bounded integer with at most this many values is sent as an enum of them (see
# `decodable`); wider ranges keep `minimum` / `maximum` and rely on validation in code.
ENUM_RANGE_LIMIT = 101


def step_schema(
    step: str, output: type[Any], tool_names: Sequence[str] | None = None
) -> dict[str, Any]:
    """The JSON Schema requested for `step`: derived from its registered output model (or from
    `output`, when a caller validates a registered step's reply with another model), in the
    form schema-decoding servers enforce (`decodable`). With `tool_names`, a `tool_call` field
    is narrowed to those names (or null), so a server that decodes under the schema cannot
    invent a tool; the registered schema is not changed."""
    registered = steps.get(step)
    if output is registered.output:
        schema = registered.schema
    else:
        schema = steps.response_schema(replies.pydantic_model(output))
    schema = decodable(schema)
    if tool_names is None or "tool_call" not in schema.get("properties", {}):
        return schema
    field = schema["properties"]["tool_call"]
    names = list(dict.fromkeys(str(name) for name in tool_names))
    # `enum` alone, no `type`: llama.cpp's and llama-cpp-python's grammar converters read a
    # list `type` as a union of plain types and drop the `enum` beside it (docs/llm-protocol.md,
    # "Constraints a decoding server enforces").
    narrowed: dict[str, Any] = {"enum": [*names, None]}
    if "description" in field:
        narrowed["description"] = field["description"]
    schema["properties"]["tool_call"] = narrowed
    return schema


def decodable(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `schema` whose constraints every schema-decoding server enforces: an `enum`
    loses a list `type` (beside one, llama.cpp's grammar converters build a union of the plain
    types and drop the enum), and a bounded integer of at most `ENUM_RANGE_LIMIT` values (confidence
    1–10, a score 0–100) becomes the enum of its values (no grammar converter we know of
    enforces `minimum` / `maximum`). The reply is still validated in code."""
    out = {key: copy.deepcopy(value) for key, value in schema.items()}
    kind = out.get("type")
    if "enum" in out:
        if isinstance(kind, list):
            out.pop("type")
    elif kind == "integer" and _small_range(out):
        low, high = int(out.pop("minimum")), int(out.pop("maximum"))
        out["enum"] = list(range(low, high + 1))
        out.pop("type")
    properties = out.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {
            name: decodable(spec) if isinstance(spec, Mapping) else spec
            for name, spec in properties.items()
        }
    items = out.get("items")
    if isinstance(items, Mapping):
        out["items"] = decodable(items)
    return out


def _small_range(spec: Mapping[str, Any]) -> bool:
    low, high = spec.get("minimum"), spec.get("maximum")
    if not isinstance(low, int) or not isinstance(high, int) or bool in (type(low), type(high)):
        return False
    return 0 < high - low + 1 <= ENUM_RANGE_LIMIT


def _integer_run(values: Sequence[Any]) -> tuple[int, int] | None:
    """(first, last) when `values` are consecutive integers (an enum made from a range)."""
    if len(values) < 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    if list(values) != list(range(values[0], values[0] + len(values))):
        return None
    return values[0], values[-1]


def _type_name(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        run = _integer_run(spec["enum"])
        if run is not None:
            return f"integer {run[0]}–{run[1]}"
        return "one of " + ", ".join(
            "null" if value is None else str(value) for value in spec["enum"]
        )
    if "anyOf" in spec:
        return " or ".join(_type_name(option) for option in spec["anyOf"])
    kind = spec.get("type", "any")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        items = spec.get("items")
        inner = _type_name(items) if isinstance(items, Mapping) else "any"
        plural = inner in ("string", "integer", "number", "boolean", "object")
        return f"array of {inner}s" if plural else f"array of {inner}"
    if kind in ("integer", "number") and "minimum" in spec and "maximum" in spec:
        return f"{kind} {spec['minimum']}–{spec['maximum']}"
    return str(kind)


def format_instruction(step: str, schema: Mapping[str, Any] | None = None) -> str:
    """The system line that asks for the step's JSON when json_schema mode is not available."""
    schema = schema if schema is not None else steps.get(step).schema
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields: list[str] = []
    for name, spec in properties.items():
        described = f'"{name}" ({_type_name(spec)}'
        if name not in required:
            described += ", optional"
        described += ")"
        description = spec.get("description")
        if description:
            described += f" — {str(description).rstrip('.')}"
        fields.append(described)
    return (
        "Reply with a single JSON object and nothing else (no prose, no code fences), "
        f"with these keys: {'; '.join(fields)}."
    )


def _with_instruction(messages: list[dict[str, str]], line: str) -> list[dict[str, str]]:
    # Appended to the leading system message rather than sent as a new system message at the
    # end: several open-model chat templates (served by vLLM / Ollama) reject a system message
    # anywhere but first.
    sent = [dict(message) for message in messages]
    if sent and sent[0].get("role") == "system":
        content = sent[0].get("content") or ""
        sent[0]["content"] = f"{content}\n\n{line}" if content else line
    else:
        sent.insert(0, {"role": "system", "content": line})
    return sent


def _configured_form() -> ResponseForm:
    """The form to start from: LLM_RESPONSE_FORMAT, `auto` (the default) being json_schema."""
    mode = str(settings.LLM_RESPONSE_FORMAT or AUTO).strip().lower()
    if mode == AUTO:
        return RESPONSE_FORMS[0]
    if mode not in RESPONSE_FORMS:
        raise ValueError(
            f"LLM_RESPONSE_FORMAT must be {AUTO} or one of {', '.join(RESPONSE_FORMS)}, "
            f"not {mode!r}"
        )
    return cast(ResponseForm, mode)


def build_request(
    step: str, messages: list[dict[str, str]], schema: dict[str, Any], form: ResponseForm
) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    """The messages to send and the `response_format` (None = omit it) for `form`."""
    if form == "json_schema":
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": step, "schema": schema, "strict": False},
        }
        return [dict(message) for message in messages], response_format
    sent = _with_instruction(messages, format_instruction(step, schema))
    if form == "json_object+schema":
        # llama-cpp-python and llama.cpp's server decode under a schema given this way.
        return sent, {"type": "json_object", "schema": schema}
    if form == "json_object":
        return sent, {"type": "json_object"}
    return sent, None


def instruction_tokens(step: str, schema: dict[str, Any], form: ResponseForm) -> int:
    """What `build_request` adds to the prompt for `form` (estimated)."""
    if form == "json_schema":
        return 0
    return estimate_tokens(format_instruction(step, schema)) + 1


type ProviderKey = tuple[str, str]

_formats_lock = threading.Lock()
_formats: dict[ProviderKey, ResponseForm] = {}
_refusals = 0  # refused calls in this process (each one a detection)
_FORMAT_CACHE_PREFIX = "llm:response-format:"
_FORMAT_CACHE_SECONDS = 7 * 24 * 3600
_REFUSAL_WORDS = ("response_format", "json_schema")


def _provider_key() -> ProviderKey:
    return (str(settings.OPENAI_BASE_URL or "https://api.openai.com/v1"), llm_model())


def _format_cache_key(key: ProviderKey) -> str:
    digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:32]
    return f"{_FORMAT_CACHE_PREFIX}{digest}"


def remembered_response_format(key: ProviderKey | None = None) -> ResponseForm | None:
    """The form the provider (base URL, model; default: the configured one) accepted after
    refusing a more constrained one: this process's memory first, then Django's cache (what
    another process detected)."""
    key = key or _provider_key()
    with _formats_lock:
        known = _formats.get(key)
    if known is not None:
        return known
    try:
        cached = cache.get(_format_cache_key(key))
    except Exception:  # the cache is an aid: without it, detection simply runs again
        logger.warning("reading the remembered response format failed", exc_info=True)
        return None
    if cached not in RESPONSE_FORMS:
        return None
    form = cast(ResponseForm, cached)
    with _formats_lock:
        _formats[key] = form
    return form


def remember_form(key: ProviderKey, form: ResponseForm) -> None:
    with _formats_lock:
        _formats[key] = form
    try:
        cache.set(_format_cache_key(key), form, _FORMAT_CACHE_SECONDS)
    except Exception:
        logger.warning("storing the remembered response format failed", exc_info=True)


def forget_response_formats() -> None:
    """Forget what this process learnt about providers' response formats (Django's cache keeps
    its copy; tests clear both)."""
    global _refusals
    with _formats_lock:
        _formats.clear()
        _refusals = 0


def response_format_refusals() -> int:
    """How many calls a provider refused for their response_format in this process."""
    with _formats_lock:
        return _refusals


def count_refusal() -> None:
    global _refusals
    with _formats_lock:
        _refusals += 1


def refuses_format(exc: openai.OpenAIError) -> bool:
    """The provider refused the request's response_format: any 4xx or 5xx (but auth and rate
    limits) whose message or body names `response_format` or `json_schema`."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    if exc.status_code < 400 or exc.status_code in (401, 403, 429):
        return False
    parts = [str(exc.message or "")]
    with contextlib.suppress(Exception):  # an unreadable body: the message alone decides
        parts.append(json.dumps(exc.body, default=str) if exc.body is not None else "")
        parts.append(exc.response.text)
    text = " ".join(parts).lower()
    return any(word in text for word in _REFUSAL_WORDS)


def start_form() -> tuple[ResponseForm, ProviderKey]:
    key = _provider_key()
    start = _configured_form()
    known = remembered_response_format(key)
    if known is not None and RESPONSE_FORMS.index(known) > RESPONSE_FORMS.index(start):
        start = known
    return start, key


def response_format_details(
    asked: ResponseForm, used: ResponseForm, refused: list[ResponseForm]
) -> dict[str, Any]:
    return {"response_format": {"asked": asked, "used": used, "refused": list(refused)}}
