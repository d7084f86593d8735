"""Migration 0012: a plan's per-mode multiplier columns become one JSON field; every plan keeps
its values, and going back restores the columns."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("clients", "0011_playground_modes")]
AFTER = [("clients", "0012_plan_multipliers_by_mode")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_the_multiplier_columns_move_to_the_json_field_and_back() -> None:
    try:
        old = _migrate(BEFORE).get_model("clients", "Plan")
        old.objects.create(
            slug="custom",
            name="Custom",
            multiplier_standard=Decimal("1.2"),
            multiplier_adaptive=Decimal("0.875"),
            multiplier_deliberative=Decimal("4"),
        )
        old.objects.create(slug="defaults", name="Defaults")

        new = _migrate(AFTER).get_model("clients", "Plan")
        assert new.objects.get(slug="custom").multipliers == {
            "standard": "1.200",
            "adaptive": "0.875",
            "deliberative": "4.000",
        }
        assert new.objects.get(slug="defaults").multipliers == {
            "standard": "1.000",
            "adaptive": "1.500",
            "deliberative": "2.500",
        }
        new.objects.filter(slug="defaults").update(multipliers={"adaptive": "2.25"})

        back = _migrate(BEFORE).get_model("clients", "Plan")
        custom = back.objects.get(slug="custom")
        assert (custom.multiplier_standard, custom.multiplier_adaptive) == (
            Decimal("1.2"),
            Decimal("0.875"),
        )
        defaults = back.objects.get(slug="defaults")
        assert (defaults.multiplier_standard, defaults.multiplier_adaptive) == (
            Decimal("1.0"),
            Decimal("2.25"),
        )
    finally:
        _migrate(
            [(app, name) for app, name in MigrationExecutor(connection).loader.graph.leaf_nodes()]
        )
