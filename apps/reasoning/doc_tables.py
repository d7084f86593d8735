"""The documentation tables generated from the registries (steps, modes, executors).

Each table lives in a docs file between two marker lines:

    <!-- generated: <name> (python manage.py doc_tables) -->
    …
    <!-- end generated: <name> -->

`python manage.py doc_tables` rewrites every block from the registries; `--check` (and
tests/reasoning/test_doc_tables.py) fails when a file differs from what would be written, so a
step, mode or executor added without regenerating the docs fails CI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from apps.clients import modes
from apps.reasoning import steps
from apps.tools.executors import executors

__all__ = ["BLOCKS", "Block", "render_file", "stale_files", "write_files"]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(spec: Mapping[str, Any]) -> str:
    kinds = spec.get("type")
    if "enum" in spec:
        return " · ".join(f"`{v}`" for v in spec["enum"])
    names = [kinds] if isinstance(kinds, str) else list(kinds or [])
    words = []
    for kind in names:
        if kind == "array":
            items = spec.get("items") or {}
            words.append(f"array of {_type(items)}" if items else "array")
        elif "minimum" in spec and "maximum" in spec:
            words.append(f"{kind} {spec['minimum']}–{spec['maximum']}")
        else:
            words.append(str(kind))
    return " or ".join(words)


def _fields(schema: Mapping[str, Any]) -> str:
    return ", ".join(f"`{name}` ({_type(spec)})" for name, spec in schema["properties"].items())


def steps_table() -> str:
    rows = [
        "| step | what it does | reply fields | example reply |",
        "|---|---|---|---|",
    ]
    for name in steps.names():
        step = steps.get(name)
        example = json.dumps(step.example, ensure_ascii=False)
        rows.append(
            f"| `{name}` | {_cell(step.description)} | {_fields(step.schema)} | "
            f"`{_cell(example)}` |"
        )
    return "\n".join(rows)


def modes_table() -> str:
    rows = [
        "| mode | label | what it runs | steps | default multiplier | cost rank |",
        "|---|---|---|---|---|---|",
    ]
    for mode in modes.modes():
        rows.append(
            f"| `{mode.name}` | {_cell(mode.label)} | {_cell(mode.summary)} | "
            f"{', '.join(f'`{s}`' for s in mode.steps)} | {mode.default_multiplier} | "
            f"{mode.cost_rank} |"
        )
    return "\n".join(rows)


def _limits(spec: Mapping[str, Any]) -> str:
    parts = []
    if "enum" in spec:
        parts.append("one of " + ", ".join(f"`{v}`" for v in spec["enum"]))
    if "pattern" in spec:
        parts.append(f"matches `{spec['pattern']}`")
    for key, text in (
        ("minLength", "≥ {} characters"),
        ("maxLength", "≤ {} characters"),
        ("exclusiveMinimum", "> {}"),
        ("minimum", "≥ {}"),
        ("maximum", "≤ {}"),
    ):
        if key in spec:
            parts.append(text.format(spec[key]))
    if spec.get("writeOnly"):
        parts.append("write-only")
    return "; ".join(parts)


def executors_table() -> str:
    rows = [
        "| `type` | property | type | required | default | rules | stored in |",
        "|---|---|---|---|---|---|---|",
    ]
    for executor in executors().values():
        schema = executor.settings_schema()
        for name, spec in schema["properties"].items():
            default = json.dumps(spec["default"]) if "default" in spec else ""
            rows.append(
                f"| `{executor.type}` | `{name}` | {spec.get('type', '')} | "
                f"{'yes' if name in schema.get('required', []) else 'no'} | {_cell(default)} | "
                f"{_cell(_limits(spec))} | `ClientTool.{spec['x-column']}` |"
            )
    return "\n".join(rows)


@dataclass(frozen=True)
class Block:
    path: str  # relative to BASE_DIR
    name: str
    render: Callable[[], str]

    @property
    def begin(self) -> str:
        return f"<!-- generated: {self.name} (python manage.py doc_tables) -->"

    @property
    def end(self) -> str:
        return f"<!-- end generated: {self.name} -->"


BLOCKS: list[Block] = [
    Block("docs/llm-protocol.md", "steps", steps_table),
    Block("docs/architecture.md", "modes", modes_table),
    Block("docs/tenant-import.md", "executors", executors_table),
]


def _root() -> Path:
    return Path(settings.BASE_DIR)


def render_file(path: str) -> tuple[str, str]:
    """(the file as it is, the file as the generator writes it)."""
    current = (_root() / path).read_text(encoding="utf-8")
    text = current
    for block in (b for b in BLOCKS if b.path == path):
        pattern = re.compile(re.escape(block.begin) + r"\n.*?" + re.escape(block.end), re.S)
        match = pattern.search(text)
        if match is None:
            raise LookupError(f"{path} has no {block.begin!r} … {block.end!r} block")
        body = f"{block.begin}\n{block.render()}\n{block.end}"
        text = text[: match.start()] + body + text[match.end() :]
    return current, text


def _paths() -> list[str]:
    return list(dict.fromkeys(b.path for b in BLOCKS))


def stale_files() -> list[str]:
    """The docs files whose generated blocks differ from the registries."""
    return [path for path in _paths() if render_file(path)[0] != render_file(path)[1]]


def write_files() -> list[str]:
    """Rewrite every generated block; return the files that changed."""
    changed = []
    for path in _paths():
        current, text = render_file(path)
        if text != current:
            (_root() / path).write_text(text, encoding="utf-8")
            changed.append(path)
    return changed
