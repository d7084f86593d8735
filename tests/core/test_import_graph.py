"""The import graph, checked by the tests too (not only by `make imports`): no two apps import
each other below the surfaces, and the product never imports the test suite.

The graph is grimp's, the engine behind import-linter; `scripts/import_graph.py` prints the same
figures for a person."""

from __future__ import annotations

import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import import_graph  # noqa: E402


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return import_graph.build_graph()


# Pairs of apps that import each other below the surfaces: none since the request plumbing left
# core for apps.api (resolver, permissions), which sits above accounts and clients. The set may
# only shrink: a new pair fails, and a pair that goes must go from here too.
REMAINING_PAIRS: dict[str, set[str]] = {"runtime": set(), "with-annotations": set()}


@pytest.mark.parametrize("type_checking", [False, True], ids=["runtime", "with-annotations"])
def test_no_two_apps_import_each_other_outside_the_surfaces(type_checking: bool) -> None:
    """Annotation-only imports (`if TYPE_CHECKING:`) count too: a type that names a higher app
    couples the lower one to it as surely as a call does."""
    edges = import_graph.app_edges(
        import_graph.build_graph(type_checking=type_checking), skip_surfaces=True
    )
    cycles = {
        f"{a} <-> {b}": sorted(edges[(a, b)] + edges[(b, a)])
        for a, b in import_graph.mutual_pairs(edges)
    }
    remaining = REMAINING_PAIRS["with-annotations" if type_checking else "runtime"]

    assert {pair: cycles[pair] for pair in cycles if pair not in remaining} == {}
    assert set(cycles) == remaining


@pytest.mark.parametrize(
    ("module", "surface"),
    [
        ("apps.clients.admin", True),
        ("apps.tools.apis", True),
        ("apps.api.admin", True),
        ("apps.widget.serializers", True),
        ("apps.console.views", True),
        ("apps.playground.views", True),
        # Only admin, API and view modules: not a whole app, not the request plumbing.
        ("apps.console.access", False),
        ("apps.widget.auth", False),
        ("apps.api.base", False),
        ("apps.api.resolver", False),
        ("apps.api.permissions", False),
        ("apps.clients.urls", False),
        ("apps.provisioning.management.commands.import_client", False),
        ("apps.reasoning.services", False),
    ],
)
def test_only_admin_api_and_view_modules_are_surfaces(module: str, surface: bool) -> None:
    assert import_graph.is_surface(module) is surface


@pytest.mark.parametrize("type_checking", [False, True], ids=["runtime", "with-annotations"])
def test_the_kernel_imports_no_app(type_checking: bool) -> None:
    """apps.core (tenancy, registry, errors, deadlines, languages) sits below every app: it
    imports none, not even for annotations."""
    graph = import_graph.build_graph(type_checking=type_checking)
    kernel = [m for m in graph.modules if import_graph.app_of(m) == "apps.core"]
    reaching_apps = sorted(
        (importer, imported)
        for importer in kernel
        for imported in graph.find_modules_directly_imported_by(importer)
        if import_graph.app_of(imported) not in (None, "apps.core")
    )

    assert reaching_apps == []


def test_the_product_never_imports_the_tests(graph: grimp.ImportGraph) -> None:
    product = [m for m in graph.modules if m.split(".")[0] in ("apps", "config")]
    reaching_tests = sorted(
        (importer, imported)
        for importer in product
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[0] == "tests"
    )

    assert reaching_tests == []


def test_a_cycle_below_the_surfaces_is_found() -> None:
    """The check itself: an import from a lower app's selectors back into a higher app is a
    cycle; the same import from an admin module is not (surfaces sit on top)."""
    graph = import_graph.build_graph()  # its own: this test adds imports to it
    graph.add_import(importer="apps.clients.selectors", imported="apps.tools.models")
    graph.add_import(importer="apps.clients.admin", imported="apps.reasoning.models")

    edges = import_graph.app_edges(graph, skip_surfaces=True)

    assert ("apps.clients", "apps.tools") in import_graph.mutual_pairs(edges)
    assert ("apps.clients", "apps.reasoning") not in import_graph.mutual_pairs(edges)


def test_the_escalation_status_read_by_conversations_is_the_model_s() -> None:
    """conversations.selectors names the open status by value, to avoid importing escalations."""
    from apps.conversations.selectors import ESCALATION_OPEN
    from apps.escalations.models import EscalationStatus

    assert ESCALATION_OPEN == EscalationStatus.OPEN


def test_the_surface_rule_is_counted_apart_from_the_exceptions() -> None:
    """A pattern whose importer is a surface is the surface rule: it counts only the imports it
    lets up a layer (the ones the contract would report). Any other pattern is an exception and
    counts every import it matches."""
    graph = grimp.ImportGraph()
    for importer, imported in [
        ("apps.low.admin", "apps.high.models"),  # up a layer: let through by the rule
        ("apps.low.admin", "apps.low.models"),  # its own app: never reported
        ("apps.high.admin", "apps.low.models"),  # down a layer: never reported
        ("apps.low.resolver", "apps.high.auth"),  # the exception
    ]:
        graph.add_import(importer=importer, imported=imported)
    contracts = [
        {
            "id": "layers",
            "type": "layers",
            "layers": ["apps.high", "apps.low"],
            "ignore_imports": ["apps.*.admin -> apps.**", "apps.low.resolver -> apps.high.auth"],
        }
    ]

    hidden, per_pattern, by_rule, per_rule = import_graph.ignored_imports(graph, contracts)

    assert by_rule == {("apps.low.admin", "apps.high.models")}
    assert per_rule == {"layers: apps.*.admin -> apps.**": (1, 3)}
    assert hidden == {("apps.low.resolver", "apps.high.auth")}
    assert per_pattern == {"layers: apps.low.resolver -> apps.high.auth": 1}
