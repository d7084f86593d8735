#!/usr/bin/env python
"""Figures about GuideDesk's import graph, from grimp (the engine behind import-linter).

Prints:
- the pairs of apps that import each other, counting every module, and again counting only
  the modules below the surfaces (admin, the HTTP API's views and serializers, and views are
  left out; nothing else is); both for the imports that run and with the imports under
  `if TYPE_CHECKING:` counted too;
- how many direct imports the ignore_imports of pyproject.toml's import-linter contracts hide,
  each pattern expanded over the graph the way import-linter expands it, in two parts: the
  surface rule (a pattern whose importer is a surface, e.g. `apps.*.admin -> apps.**`: the
  imports it lets through that go up a layer or across independent siblings, the only ones the
  contract would report) and every other ignore (an exception: each import it matches);
- the number of import-linter contracts.

Run it from the repository root: `.venv/bin/python scripts/import_graph.py`.
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# A module is a surface — an admin page, the HTTP API (its views and the serializers that shape
# its bodies) or a view — when one of the parts of its name after the app is one of these. Only
# these: a whole app (the console, the widget, apps.api itself), a URLconf, a management command,
# a permission check, the resolver or the API base class (apps.api.base) is not a surface, so its
# imports count like any other module's.
SURFACE_PARTS = frozenset({"admin", "apis", "serializers", "views"})


def build_graph(*, type_checking: bool = False) -> grimp.ImportGraph:
    """The graph import-linter sees; with type_checking, imports for annotations count too."""
    return grimp.build_graph(
        "apps", "config", "tests", exclude_type_checking_imports=not type_checking
    )


def app_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "apps" or len(parts) < 2:
        return None
    return ".".join(parts[:2])


def is_surface(module: str) -> bool:
    if app_of(module) is None:
        return False
    return any(part in SURFACE_PARTS for part in module.split(".")[2:])


def direct_imports(graph: grimp.ImportGraph) -> Iterable[tuple[str, str]]:
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            yield importer, imported


def app_edges(graph: grimp.ImportGraph, *, skip_surfaces: bool) -> dict[tuple[str, str], list]:
    """(importing app, imported app) -> the module imports that make the edge."""
    edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for importer, imported in direct_imports(graph):
        a, b = app_of(importer), app_of(imported)
        if a is None or b is None or a == b:
            continue
        if skip_surfaces and (is_surface(importer) or is_surface(imported)):
            continue
        edges.setdefault((a, b), []).append((importer, imported))
    return edges


def mutual_pairs(edges: dict[tuple[str, str], list]) -> list[tuple[str, str]]:
    return sorted((a, b) for (a, b) in edges if a < b and (b, a) in edges)


@cache
def pattern_regex(pattern: str) -> re.Pattern[str]:
    # import-linter: `*` stands for one part of a module name, `**` for one or more.
    parts = []
    for part in pattern.strip().split("."):
        if part == "**":
            parts.append(r"[^.]+(?:\.[^.]+)*")
        elif part == "*":
            parts.append(r"[^.]+")
        else:
            parts.append(re.escape(part))
    return re.compile(r"\.".join(parts) + r"\Z")


def layer_index(contract: dict) -> dict[str, int]:
    """A layers contract without containers: each layer's module -> its rank (0 = the top)."""
    if contract.get("type") != "layers" or contract.get("containers"):
        return {}
    return {
        name.strip().strip("()"): rank
        for rank, layer in enumerate(contract.get("layers", []))
        for name in layer.split("|")
    }


def reported_by(ranks: dict[str, int], importer: str, imported: str) -> bool:
    """Whether the layers contract would report this direct import: it goes up a layer, or
    across two independent siblings of one layer."""

    def layer(module: str) -> str | None:
        found = [name for name in ranks if module == name or module.startswith(name + ".")]
        return max(found, key=len) if found else None

    a, b = layer(importer), layer(imported)
    if a is None or b is None or a == b:
        return False
    return ranks[b] <= ranks[a]


def ignored_imports(
    graph: grimp.ImportGraph, contracts: list[dict]
) -> tuple[set[tuple[str, str]], dict[str, int], set[tuple[str, str]], dict[str, tuple[int, int]]]:
    """The imports the exceptions hide (each pattern: all it matches), and apart from them the
    imports the surface rule lets through (each pattern: (reported, matched))."""
    pairs = list(direct_imports(graph))
    hidden: set[tuple[str, str]] = set()
    per_pattern: dict[str, int] = {}
    by_rule: set[tuple[str, str]] = set()
    per_rule: dict[str, tuple[int, int]] = {}
    for contract in contracts:
        ranks = layer_index(contract)
        for pattern in contract.get("ignore_imports", []):
            left, _, right = pattern.partition("->")
            lre, rre = pattern_regex(left), pattern_regex(right)
            hits = {(a, b) for a, b in pairs if lre.match(a) and rre.match(b)}
            label = f"{contract.get('id', '?')}: {pattern.strip()}"
            if is_surface(left.strip()):
                reported = {(a, b) for a, b in hits if reported_by(ranks, a, b)}
                per_rule[label] = (len(reported), len(hits))
                by_rule |= reported
            else:
                per_pattern[label] = len(hits)
                hidden |= hits
    return hidden, per_pattern, by_rule, per_rule


def main() -> int:
    verbose = "-v" in sys.argv[1:]  # -v: the module imports behind each pair
    graph = build_graph()
    annotated = build_graph(type_checking=True)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]

    for label, skip, g in (
        ("all modules", False, graph),
        ("outside surface modules", True, graph),
        ("all modules, TYPE_CHECKING imports too", False, annotated),
        ("outside surface modules, TYPE_CHECKING imports too", True, annotated),
    ):
        edges = app_edges(g, skip_surfaces=skip)
        pairs = mutual_pairs(edges)
        print(f"App pairs importing each other ({label}): {len(pairs)}")
        for a, b in pairs:
            print(f"  {a} <-> {b}")
            if verbose:
                for importer, imported in edges[(a, b)] + edges[(b, a)]:
                    print(f"      {importer} -> {imported}")

    hidden, per_pattern, by_rule, per_rule = ignored_imports(graph, contracts)
    print(
        "Direct imports the surface rule lets through (a surface importing a higher app): "
        f"{len(by_rule)}"
    )
    for pattern, (reported, matched) in per_rule.items():
        print(f"  {reported:4d}  {pattern}  (of {matched} it matches)")
        if verbose:
            for importer, imported in sorted(
                (a, b)
                for a, b in by_rule
                if pattern_regex(pattern.split(": ", 1)[1].partition("->")[0]).match(a)
            ):
                print(f"      {importer} -> {imported}")
    print(f"Direct imports hidden by ignore_imports (exceptions): {len(hidden)}")
    for pattern, count in per_pattern.items():
        print(f"  {count:4d}  {pattern}")
    apps_importing_tests = sorted(
        (a, b) for a, b in direct_imports(graph) if a.startswith("apps.") and b.startswith("tests")
    )
    print(f"Imports of tests from apps: {len(apps_importing_tests)}")
    for a, b in apps_importing_tests:
        print(f"  {a} -> {b}")
    print(f"Contracts: {len(contracts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
