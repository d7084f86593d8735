from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from apps.clients import modes
from apps.clients.business_info import business_info_errors
from apps.clients.models import AIMode, Plan
from tests.factories import ClientFactory, PlanFactory

pytestmark = pytest.mark.django_db


def test_plan_defaults_to_standard_mode():
    plan = Plan.objects.create(slug="basic", name="Basic")
    assert plan.ai_mode == AIMode.STANDARD


def test_plan_multiplier_per_mode_is_decimal():
    plan = PlanFactory(multipliers={"adaptive": "1.5", "deliberative": "2.5"})
    plan.refresh_from_db()
    assert plan.multiplier_for("standard") == Decimal("1.0")  # not listed: the mode's default
    assert plan.multiplier_for("adaptive") == Decimal("1.5")
    assert isinstance(plan.multiplier_for("deliberative"), Decimal)
    assert set(plan.mode_multipliers) == set(modes.names())  # every registered mode
    assert {name: plan.mode_multipliers[name] for name in ("standard", "adaptive")} == {
        "standard": Decimal("1"),
        "adaptive": Decimal("1.5"),
    }


def test_plan_rejects_unknown_mode_and_negative_multiplier():
    plan = PlanFactory.build(slug="x", ai_mode="turbo", multipliers={"adaptive": "-1"})
    with pytest.raises(ValidationError) as exc:
        plan.full_clean()
    assert set(exc.value.message_dict) >= {"ai_mode", "multipliers"}
    assert "adaptive: must be 0 or more" in exc.value.message_dict["multipliers"][0]
    with pytest.raises(ValueError, match="Unknown AI mode"):
        PlanFactory().multiplier_for("turbo")


@pytest.mark.parametrize(
    ("multipliers", "problem"),
    [
        ({"turbo": "2"}, "turbo: unknown mode"),
        ({"standard": 1.5}, "standard: must be a decimal string"),
        ({"standard": "1.2345"}, "standard: must have at most 3 decimal places"),
        ({"standard": "lots"}, "standard: must be a decimal number"),
        ({"standard": "1000"}, "standard: must be at most 999.999"),
        (["1.0"], "must be an object"),
    ],
)
def test_plan_multipliers_are_validated_against_the_mode_registry(multipliers, problem):
    plan = PlanFactory.build(slug="x", multipliers=multipliers)
    with pytest.raises(ValidationError) as exc:
        plan.full_clean()
    assert problem in exc.value.message_dict["multipliers"][0]


def test_business_info_valid_shape_has_no_errors():
    assert business_info_errors(ClientFactory.build().business_info) == {}
    assert business_info_errors({}) == {}


@pytest.mark.parametrize(
    ("value", "path", "fragment"),
    [
        ({"polices": {}}, "polices", "Unknown field"),
        ({"about": {"description": 5}}, "about.description", "Must be a string"),
        (
            {"faqs": [{"question": "q", "answer": "a"}, {"question": "q2"}]},
            "faqs[1].answer",
            "Required",
        ),
        ({"faqs": {"question": "q"}}, "faqs", "Must be a array"),
        ({"policies": {"returns": "x" * 20001}}, "policies.returns", "At most 20000"),
        ({"contact": {"fax": "1"}}, "contact.fax", "Allowed here: address, email, hours, phone"),
        ([], "business_info", "Must be a object"),
    ],
)
def test_business_info_errors_name_the_field(value, path, fragment):
    errors = business_info_errors(value)
    assert path in errors, errors
    assert fragment in errors[path]


def test_client_clean_reports_business_info_and_origins():
    client = ClientFactory.build(
        business_info={"faqs": [{"question": "q"}]}, allowed_origins=["shop.example", "ftp://x"]
    )
    with pytest.raises(ValidationError) as exc:
        client.clean()
    errors = exc.value.message_dict
    assert errors["business_info"] == ["faqs[0].answer: Required."]
    assert len(errors["allowed_origins"]) == 2


def test_client_clean_normalizes_origins():
    client = ClientFactory.build(allowed_origins=["https://Shop.Example/"])
    client.clean()
    assert client.allowed_origins == ["https://shop.example"]


def test_client_gets_unique_widget_key(plan):
    a, b = ClientFactory(plan=plan), ClientFactory(plan=plan)
    assert a.widget_key.startswith("wk_")
    assert a.widget_key != b.widget_key
