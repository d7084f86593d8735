"""The README's configuration table stays true: every environment variable the
settings modules read (`env(...)`, `env.int/.bool/.list/.db/...`, `os.environ[...]`,
`os.environ.get`, `os.getenv`) has a row, and the row's default column shows each module's
default — or says "required" where a module reads it without one.

The settings are read as source (ast), not imported, so a variable is found even when the
environment of the test run sets it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "config" / "settings"
README = ROOT / "README.md"
NO_DEFAULT = object()  # read without a default: required


@dataclass(frozen=True)
class EnvRead:
    module: str
    name: str
    default: Any  # the default's value, NO_DEFAULT, or an ast node when it is an expression
    line: int


def _literal_name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_env(node: ast.expr) -> bool:
    """`env` itself or `env.<cast>` (the module's django-environ `Env` instance)."""
    if isinstance(node, ast.Name):
        return node.id == "env"
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id == "env")
    )


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _default_of(node: ast.expr | None) -> Any:
    if node is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return node  # an expression: evaluated against the settings module below


def env_reads(path: Path) -> list[EnvRead]:
    tree = ast.parse(path.read_text(), filename=str(path))
    # parts/<area> for the shared parts, <module> for the environments
    module = (
        path.relative_to(SETTINGS).with_suffix("").as_posix()
        if SETTINGS in path.parents
        else path.stem
    )
    found: list[EnvRead] = []
    for node in ast.walk(tree):
        name: str | None = None
        default: Any = NO_DEFAULT
        if isinstance(node, ast.Call):
            func = node.func
            if _is_env(func):
                if not node.args:
                    continue
                name = _literal_name(node.args[0])
                default_node = next((k.value for k in node.keywords if k.arg == "default"), None)
                if default_node is None and len(node.args) > 2:  # env(name, cast, default)
                    default_node = node.args[2]
                default = _default_of(default_node)
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "get"
                and _is_os_environ(func.value)
            ) or (
                isinstance(func, ast.Attribute)
                and func.attr == "getenv"
                and isinstance(func.value, ast.Name)
                and func.value.id == "os"
            ):
                name = _literal_name(node.args[0]) if node.args else None
                default = _default_of(node.args[1]) if len(node.args) > 1 else None
            else:
                continue
            if name is None:
                pytest.fail(f"{path.name}:{node.lineno}: an env var read without a literal name")
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            name = _literal_name(node.slice)
            if name is None:
                pytest.fail(f"{path.name}:{node.lineno}: an env var read without a literal name")
        else:
            continue
        found.append(EnvRead(module, name, default, node.lineno))
    return found


def all_env_reads() -> list[EnvRead]:
    reads = [read for path in sorted(SETTINGS.rglob("*.py")) for read in env_reads(path)]
    assert reads, "no env reads found: has the settings layout changed?"
    return reads


def readme_table() -> dict[str, str]:
    """`VARIABLE` → its default cell, from the README's configuration table."""
    text = README.read_text()
    return table_rows(text.split("## Configuration", 1)[1].split("\n## ", 1)[0])


def table_rows(text: str) -> dict[str, str]:
    """`VARIABLE` → its cell in the "default" column, from every table whose second column is
    the default (other tables — e.g. which process reads a variable — are not about it)."""
    rows: dict[str, str] = {}
    defaults_table = False
    lines = text.splitlines()
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("|") and following.startswith("|---"):
            cells = [cell.strip().lower() for cell in line.strip("|").split("|")]
            defaults_table = len(cells) > 1 and "default" in cells[1]
            continue
        if not defaults_table:
            continue
        match = re.match(r"^\|\s*`([A-Z0-9_]+)`\s*\|([^|]*)\|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


def _evaluate(read: EnvRead) -> Any:
    """An expression default (`2 * CELERY_TASK_TIME_LIMIT`, a path under BASE_DIR) evaluated in
    the namespace of the base settings (every other module extends it; importing production
    itself would need its required variables)."""
    import config.settings.base

    namespace = vars(config.settings.base)
    expression = ast.Expression(read.default)
    value = eval(compile(expression, f"<{read.module} default>", "eval"), dict(namespace))  # noqa: S307
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        value = value.replace(f"{namespace['BASE_DIR']}/", "")
    return value


def rendered(value: Any) -> list[str]:
    """How a default may be written in the table (each in backticks)."""
    if isinstance(value, bool):
        return [f"`{value}`"]
    if isinstance(value, float) and value.is_integer():
        return [f"`{int(value)}`", f"`{value}`"]
    if isinstance(value, list | tuple):
        return [f"`{','.join(map(str, value))}`"] if value else []
    return [f"`{value}`"] if value != "" else []


EMPTY_WORDS = ("*(unset)*", "*(empty)*")


def test_every_env_var_the_settings_read_is_in_the_readme_with_its_default() -> None:
    table = readme_table()
    problems: list[str] = []
    for read in all_env_reads():
        where = f"config/settings/{read.module}.py:{read.line} {read.name}"
        cell = table.get(read.name)
        if cell is None:
            problems.append(f"{where}: not in the README's configuration table")
            continue
        if read.default is NO_DEFAULT:
            if "required" not in cell:
                problems.append(f"{where}: read without a default, the table must say required")
            continue
        value = _evaluate(read) if isinstance(read.default, ast.AST) else read.default
        forms = rendered(value)
        if not forms:  # empty string / list
            if not any(word in cell for word in EMPTY_WORDS):
                problems.append(f"{where}: default is empty; the table says {cell!r}")
        elif not any(form in cell for form in forms):
            problems.append(f"{where}: default {forms[0]}; the table says {cell!r}")
    assert not problems, "\n".join(problems)


def test_settings_tables_in_docs_agree_with_the_code() -> None:
    """docs/*.md repeat some rows of the table (billing, the LLM): their literal defaults must
    be the code's too (docs/billing.md said 4000 while the code reserved 12000)."""
    defaults: dict[str, set[str]] = {}
    for read in all_env_reads():
        if read.default is NO_DEFAULT or isinstance(read.default, ast.AST):
            continue  # required, or an expression the docs may spell out in words
        forms = [form.strip("`") for form in rendered(read.default)]
        defaults.setdefault(read.name, set()).update(forms or ["empty", "unset"])
    problems = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for name, cell in table_rows(doc.read_text()).items():
            if name not in defaults:
                continue
            words = set(re.findall(r"[^\s`*()=,;:]+", cell.lower()))
            if not {form.lower() for form in defaults[name]} & words:
                problems.append(f"{doc.name}: {name} default {sorted(defaults[name])}, says {cell}")
    assert not problems, "\n".join(problems)


def test_every_variable_in_the_table_is_read_somewhere() -> None:
    """The table documents nothing that no code reads (a renamed variable leaves no ghost)."""
    sources = "\n".join(
        path.read_text()
        for folder in ("config", "apps")
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts
    )
    ghosts = [name for name in readme_table() if f'"{name}"' not in sources]
    assert not ghosts, ghosts


def test_the_parser_of_this_test_finds_every_kind_of_read(tmp_path: Path) -> None:
    """The checker itself: each way of reading a variable is found, with its default."""
    source = tmp_path / "sample.py"
    source.write_text(
        "import os\n"
        "A = env('A', default='x')\n"
        "B = env.int('B', default=3)\n"
        "C = env.list('C', default=['p', 'q'])\n"
        "D = env.db('D')\n"
        "E = os.environ.get('E', 'e')\n"
        "F = os.environ['F']\n"
        "G = os.getenv('G')\n"
        "H = env.bool('H', default=X * 2)\n"
    )
    reads = {read.name: read.default for read in env_reads(source)}
    assert set(reads) == set("ABCDEFGH")
    assert (reads["A"], reads["B"], reads["C"], reads["E"]) == ("x", 3, ["p", "q"], "e")
    assert reads["D"] is NO_DEFAULT
    assert reads["F"] is NO_DEFAULT
    assert reads["G"] is None
    assert isinstance(reads["H"], ast.BinOp)


def test_widget_docs_name_every_cors_header_the_settings_allow() -> None:
    """docs/widget.md told cross-origin callers that `X-Widget-Key` was not allowed and to use
    `?key=`, while the settings allow it (and `Last-Event-ID`)."""
    from corsheaders.defaults import default_headers
    from django.conf import settings

    section = (ROOT / "docs" / "widget.md").read_text().split("### CORS", 1)[1]
    section = section.split("\n## ", 1)[0].lower()
    added = set(settings.CORS_ALLOW_HEADERS) - set(default_headers)
    assert added, "the widget's own headers are no longer allowed: update docs/widget.md"
    for header in added:
        assert f"`{header}`" in section, header
    assert "adds `x-widget-key`" not in section
