"""No module of `apps/` (nor of `devtools/`) imports another module's private names.

A name that starts with `_` is private to the module that defines it, or, for a module of a
package (`apps/reasoning/steps/_data.py`), to that package: code inside the package may import
it, code outside may not. What another module needs is public, under a name without the
underscore."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

CHECKED = (ROOT / "apps", ROOT / "devtools")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_owner(dotted: str) -> str | None:
    """The module or package a dotted name is private to, or None when it is public."""
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def imported_names(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" for alias in node.names]


def private_imports(path: Path, source: str) -> list[str]:
    """`path:line: name` for each private name `source` (the text of `path`) imports from
    outside the module or package that owns it."""
    importer = module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for dotted in imported_names(node, package):
            owner = private_owner(dotted)
            if owner is not None and not f"{importer}.".startswith(f"{owner}."):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {dotted}")
    return found


def test_no_module_in_apps_imports_another_module_s_private_names() -> None:
    found = [
        hit
        for folder in CHECKED
        for path in sorted(folder.rglob("*.py"))
        for hit in private_imports(path, path.read_text(encoding="utf-8"))
    ]

    assert found == []


@pytest.mark.parametrize(
    ("path", "source", "flagged"),
    [
        ("apps/console/inbox.py", "from apps.console.views import _json_error", True),
        ("apps/console/inbox.py", "from .views import _conversation_url", True),
        ("apps/reasoning/knowledge.py", "from apps.reasoning.steps import _data", True),
        ("apps/reasoning/knowledge.py", "from apps.reasoning.steps._data import block", True),
        ("apps/reasoning/knowledge.py", "import apps.reasoning.steps._data", True),
        ("apps/reasoning/steps/assess.py", "from apps.reasoning.steps import _data", False),
        ("apps/reasoning/steps/assess.py", "from . import _demo", False),
        ("apps/reasoning/steps/__init__.py", "from apps.reasoning.steps import _data", False),
        ("apps/console/inbox.py", "from apps.console.access import json_error", False),
        ("apps/console/inbox.py", "from apps.core import __version__", False),
    ],
)
def test_the_check_tells_a_private_import_from_a_public_one(
    path: str, source: str, flagged: bool
) -> None:
    assert bool(private_imports(ROOT / path, source)) is flagged
