"""A tenant file may give a model's cached-input price (left out, what the admin set stays) and
a plan's "deliberate when needed" threshold; the demo tenant prices cached input."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from apps.billing.models import ModelPrice
from apps.clients.models import Plan
from apps.core.exceptions import ApplicationError
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from devtools.benchmarks.modes import DEMO_TENANT

pytestmark = pytest.mark.django_db

PRICE: dict[str, Any] = {
    "model": "gpt-4.1-mini",
    "input_per_million": "0.40",
    "output_per_million": "1.60",
}
PLAN: dict[str, Any] = {"slug": "when-needed", "name": "When needed", "ai_mode": "as_needed"}


def stored() -> ModelPrice:
    return ModelPrice.objects.get(model="gpt-4.1-mini")


def test_the_cached_input_price_is_imported_and_kept_when_left_out() -> None:
    tenant_import(data={"model_prices": [{**PRICE, "cached_input_per_million": "0.10"}]})
    assert stored().cached_input_per_million == Decimal("0.10")
    assert stored().cached_input_price == Decimal("0.10")

    tenant_import(data={"model_prices": [PRICE]})
    assert stored().cached_input_per_million == Decimal("0.10")

    tenant_import(data={"model_prices": [{**PRICE, "cached_input_per_million": None}]})
    assert stored().cached_input_per_million is None
    assert stored().cached_input_price == Decimal("0.40")  # no discount


def test_a_negative_cached_price_is_refused_and_nothing_is_written() -> None:
    with pytest.raises(ApplicationError) as raised:
        tenant_import(data={"model_prices": [{**PRICE, "cached_input_per_million": "-1"}]})
    assert "cached_input_per_million" in str(raised.value)
    assert not ModelPrice.objects.filter(model="gpt-4.1-mini").exists()


def test_an_as_needed_plan_and_its_threshold_are_imported() -> None:
    tenant_import(data={"plans": [{**PLAN, "deliberate_below_confidence": 5}]})
    plan = Plan.objects.get(slug="when-needed")
    assert (plan.ai_mode, plan.deliberate_below_confidence) == ("as_needed", 5)

    tenant_import(data={"plans": [PLAN]})
    assert Plan.objects.get(slug="when-needed").deliberate_below_confidence == 7  # the default


@pytest.mark.parametrize("value", [0, 12])
def test_a_threshold_outside_1_to_11_is_refused(value: int) -> None:
    with pytest.raises(ApplicationError) as raised:
        tenant_import(data={"plans": [{**PLAN, "deliberate_below_confidence": value}]})
    assert "deliberate_below_confidence" in str(raised.value)
    assert not Plan.objects.filter(slug="when-needed").exists()


def test_the_demo_tenant_prices_cached_input() -> None:
    prices = {p["model"]: p for p in load_tenant_file(DEMO_TENANT)["model_prices"]}
    mini = prices["gpt-4o-mini"]
    assert Decimal(mini["cached_input_per_million"]) < Decimal(mini["input_per_million"])
