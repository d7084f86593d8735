"""Rubrics as data: the two shipped ones, and the admin's validation of MIN / MAX / TARGET."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from apps.clients.models import Rubric
from apps.reasoning.deliberation.config import deliberation_config
from tests.factories import ClientFactory, PlanFactory

pytestmark = pytest.mark.django_db


def test_support_and_the_seeds_contemplative_preset_ship() -> None:
    support = Rubric.objects.get(slug="support")
    assert [p["key"] for p in support.principles] == [
        "grounded",
        "policy_compliant",
        "helpful_complete",
        "caring_tone",
    ]
    contemplative = Rubric.objects.get(slug="contemplative")
    assert {p["key"]: p["definition"] for p in contemplative.principles} == {
        "mindfulness": "Meta-awareness of the reasoning process itself.",
        "emptiness": "Holding conclusions lightly and acknowledging uncertainty.",
        "nonDuality": "Recognizing interdependence and multiple valid perspectives.",
        "boundlessCare": "Considering impact on all stakeholders.",
    }
    for rubric in (support, contemplative):
        assert (rubric.min_steps, rubric.max_steps, rubric.target) == (4, 10, Decimal("0.75"))


def test_the_client_rubric_wins_over_the_plans_and_plan_overrides_win_over_the_rubric() -> None:
    contemplative = Rubric.objects.get(slug="contemplative")
    plan = PlanFactory(ai_mode="deliberative", deliberation={"max_steps": 6})
    client = ClientFactory(plan=plan)
    config = deliberation_config(client=client, plan=plan)
    assert (config.rubric, config.min_steps, config.max_steps, config.target) == (
        "support",
        4,
        6,
        0.75,
    )
    assert config.refinement_iterations == 2
    client.rubric = contemplative
    assert deliberation_config(client=client, plan=plan).rubric == "contemplative"
    assert deliberation_config(client=client, plan=plan, rubric="support").rubric == "support"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"min_steps": 0}, "deliberation_min_steps", "between 1 and 20"),
        ({"max_steps": 21}, "deliberation_max_steps", "between 1 and 20"),
        (
            {"min_steps": 6, "max_steps": 5},
            "deliberation_max_steps",
            "at least the minimum",
        ),
        ({"min_steps": 12}, "deliberation_min_steps", "at least the minimum"),
        ({"target": 0.0}, "deliberation_target", "above 0"),
        ({"target": 1.2}, "deliberation_target", "at most 1"),
    ],
)
def test_plan_overrides_are_validated_with_clear_errors(fields, field, message) -> None:
    plan = PlanFactory.build(slug="p", name="P", deliberation=fields)
    with pytest.raises(ValidationError) as caught:
        plan.full_clean()
    assert field in caught.value.message_dict
    assert any(message in m for m in caught.value.message_dict[field])


def test_valid_overrides_pass() -> None:
    plan = PlanFactory.build(
        slug="p",
        name="P",
        deliberation={"min_steps": 1, "max_steps": 20, "target": 1.0},
    )
    plan.full_clean()


def test_a_rubric_is_validated() -> None:
    rubric = Rubric(
        slug="bad",
        name="Bad",
        principles=[{"key": "a b", "label": "", "definition": "x"}, {"key": "ok"}],
        min_steps=5,
        max_steps=4,
        target=Decimal("0"),
    )
    with pytest.raises(ValidationError) as caught:
        rubric.full_clean()
    errors = caught.value.message_dict
    assert set(errors) >= {"principles", "max_steps", "target"}
    assert any("key must be an identifier" in e for e in errors["principles"])
    assert any("label must be a non-empty text" in e for e in errors["principles"])
