"""Settings are read as `settings.X`, and every default lives once, in `config/settings/`.

A `getattr(settings, "X", default)` hides a second default next to the code that reads it (the
two drift apart) and turns a misspelt name into a silent default. Both rules are checked on the
source (ast) of the product: apps/, config/, and the scripts and benchmarks next to them."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("apps", "config", "scripts", "benchmarks")


def _is_settings(node: ast.expr) -> bool:
    """`settings`, `django_settings`, or `<anything>.settings` (e.g. `conf.settings`)."""
    if isinstance(node, ast.Name):
        return node.id in {"settings", "django_settings"}
    return isinstance(node, ast.Attribute) and node.attr == "settings"


def dynamic_reads(source: str) -> list[int]:
    """Lines that read a setting through getattr/hasattr instead of `settings.X`: a default,
    an existence test, or a fixed name. (Listing the settings that exist, `getattr(settings,
    name)` over `dir(settings)`, reads no default and misspells nothing.)"""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr"}
        and node.args
        and _is_settings(node.args[0])
        and (
            node.func.id == "hasattr"
            or len(node.args) > 2
            or node.keywords
            or (len(node.args) > 1 and isinstance(node.args[1], ast.Constant))
        )
    ]


def attribute_reads(source: str) -> set[str]:
    """The UPPER_CASE names read as `settings.X` (what must exist in the settings)."""
    return {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr.isupper()
        and isinstance(node.ctx, ast.Load)
        and _is_settings(node.value)
    }


def product_sources() -> list[Path]:
    return [
        path
        for folder in PRODUCT
        if (ROOT / folder).is_dir()
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_no_setting_is_read_with_getattr_and_a_default() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in product_sources()
        for line in dynamic_reads(path.read_text())
    ]
    assert not found, "read these as settings.X, with the default in config/settings/: " + str(
        found
    )


def test_every_setting_the_product_reads_is_defined() -> None:
    """`settings.X` with no `X` in the settings would fail only when that line runs."""
    missing = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in product_sources()
        if "config/settings" not in path.as_posix()
        for name in attribute_reads(path.read_text())
        if not hasattr(settings, name)
    )
    assert not missing, missing


def test_the_checker_finds_each_form() -> None:
    source = (
        "from django import conf\n"
        "from django.conf import settings\n"
        "a = getattr(settings, 'A', 1)\n"
        "b = getattr(conf.settings, 'B')\n"
        "c = hasattr(django_settings, 'C')\n"
        "d = settings.D\n"
        "e = getattr(other, 'E', 2)\n"
        "f = [getattr(settings, n) for n in dir(settings)]\n"
        "g = getattr(settings, name, None)\n"
    )
    assert dynamic_reads(source) == [3, 4, 5, 9]
    assert attribute_reads(source) == {"D"}


def names_set(source: str) -> set[str]:
    """The module-level names a settings module assigns (not the ones it imports)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_no_setting_is_set_by_two_parts() -> None:
    """base.py star-imports every part: a name set in two of them would depend on the order."""
    seen: dict[str, str] = {}
    clashes = []
    for path in sorted((ROOT / "config" / "settings" / "parts").glob("*.py")):
        for name in names_set(path.read_text()):
            if name in seen:
                clashes.append(f"{name}: {seen[name]} and {path.name}")
            seen[name] = path.name
    assert seen, "no settings parts found"
    assert not clashes, clashes
    assert names_set("A = 1\nB: int = 2\nfrom x import C\nD['k'] = 3\n") == {"A", "B"}


def test_base_is_the_parts_and_nothing_else() -> None:
    """Every part is imported by base.py, and base.py sets nothing itself."""
    base = (ROOT / "config" / "settings" / "base.py").read_text()
    parts = {p.stem for p in (ROOT / "config" / "settings" / "parts").glob("*.py")} - {"__init__"}
    imported = {
        node.module.rsplit(".", 1)[-1]
        for node in ast.parse(base).body
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported == parts
    assert not names_set(base)
