"""Migration 0012: a plan's per-mode multiplier columns become one JSON field; every plan keeps
its values, and going back restores the columns. Run on an empty database of their own, along
`clients`' own graph (tests/support/migrations.py, `scratch_database`)."""

from __future__ import annotations

from decimal import Decimal

from django.db import DEFAULT_DB_ALIAS

from apps.clients.models import Plan
from tests.support.migrations import migrate

BEFORE = [("clients", "0011_playground_modes")]
AFTER = [("clients", "0012_plan_multipliers_by_mode")]


def test_the_multiplier_columns_move_to_the_json_field_and_back(scratch_database) -> None:
    old = migrate(BEFORE, using=scratch_database).get_model("clients", "Plan")
    old.objects.create(
        slug="custom",
        name="Custom",
        multiplier_standard=Decimal("1.2"),
        multiplier_adaptive=Decimal("0.875"),
        multiplier_deliberative=Decimal("4"),
    )
    old.objects.create(slug="defaults", name="Defaults")

    new = migrate(AFTER, using=scratch_database).get_model("clients", "Plan")
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

    back = migrate(BEFORE, using=scratch_database).get_model("clients", "Plan")
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
    assert not Plan.objects.using(DEFAULT_DB_ALIAS).filter(slug="custom").exists()


def test_the_deliberation_columns_move_to_the_json_field_and_back(scratch_database) -> None:
    """Migration 0023: the five deliberative-mode columns become `Plan.deliberation`."""
    before = [("clients", "0022_merge_names")]
    after = [("clients", "0023_plan_deliberation_settings")]
    old = migrate(before, using=scratch_database).get_model("clients", "Plan")
    old.objects.create(
        slug="deep",
        name="Deep",
        deliberation_min_steps=2,
        deliberation_max_steps=6,
        deliberation_target=Decimal("0.875"),
        refinement_iterations=3,
        refinement_stop_score=85,
    )
    old.objects.create(slug="defaults", name="Defaults")

    new = migrate(after, using=scratch_database).get_model("clients", "Plan")
    assert new.objects.get(slug="deep").deliberation == {
        "min_steps": 2,
        "max_steps": 6,
        "target": 0.875,
        "refinement_iterations": 3,
        "refinement_stop_score": 85,
    }
    assert new.objects.get(slug="defaults").deliberation == {
        "min_steps": None,
        "max_steps": None,
        "target": None,
        "refinement_iterations": 2,
        "refinement_stop_score": 90,
    }
    new.objects.filter(slug="defaults").update(deliberation={"refinement_iterations": 0})

    back = migrate(before, using=scratch_database).get_model("clients", "Plan")
    deep = back.objects.get(slug="deep")
    assert (deep.deliberation_min_steps, deep.deliberation_max_steps) == (2, 6)
    assert deep.deliberation_target == Decimal("0.875")
    assert (deep.refinement_iterations, deep.refinement_stop_score) == (3, 85)
    defaults = back.objects.get(slug="defaults")
    assert defaults.deliberation_target is None
    assert (defaults.refinement_iterations, defaults.refinement_stop_score) == (0, 90)
