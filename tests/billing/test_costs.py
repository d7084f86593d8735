"""Usage cost: provider price at call time, billed = cost × the plan's multiplier for the mode
that ran, Decimal rounded half up to 8 places."""

from __future__ import annotations

from decimal import Decimal

import pytest

from apps.billing.models import ModelPrice, UsageRecord
from apps.billing.services import billed_amount, money, usage_cost, usage_record_create
from apps.reasoning.models import ReasoningTrace
from tests.factories import ClientFactory, ModelPriceFactory, PlanFactory
from tests.support.shop import assess

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("value", "rounded"),
    [
        ("0.000000005", "0.00000001"),  # half rounds up (banker's rounding would give 0)
        ("0.000000025", "0.00000003"),  # half up, not to even
        ("0.0000000249", "0.00000002"),
        ("0.000000004999", "0.00000000"),
        ("1.234567895", "1.23456790"),
    ],
)
def test_money_rounds_half_up_to_eight_places(value: str, rounded: str) -> None:
    assert money(Decimal(value)) == Decimal(rounded)
    assert f"{money(Decimal(value)):f}" == rounded


def test_cost_is_exact_decimal_arithmetic_from_the_model_price() -> None:
    ModelPriceFactory(model="m", input_per_million="0.15", output_per_million="0.60")
    # 1234 × 0.15 / 1e6 + 567 × 0.60 / 1e6 = 0.0001851 + 0.0003402
    assert usage_cost(model="m", prompt_tokens=1234, completion_tokens=567) == Decimal("0.00052530")
    ModelPriceFactory(model="half", input_per_million="0.025", output_per_million="0")
    assert usage_cost(model="half", prompt_tokens=1, completion_tokens=0) == Decimal("0.00000003")


def test_unpriced_model_costs_nothing_instead_of_failing_the_turn() -> None:
    assert usage_cost(model="nobody-priced-me", prompt_tokens=10**6, completion_tokens=10**6) == 0


def test_billed_amount_rounds_the_product_half_up() -> None:
    assert billed_amount(cost=Decimal("0.00000001"), multiplier=Decimal("2.5")) == Decimal(
        "0.00000003"
    )
    assert billed_amount(cost=Decimal("0.00052530"), multiplier=Decimal("1.5")) == Decimal(
        "0.00078795"
    )


@pytest.mark.parametrize(
    ("mode", "multiplier"),
    [("standard", Decimal("1.0")), ("adaptive", Decimal("1.5")), ("deliberative", Decimal("2.5"))],
)
def test_each_mode_bills_with_its_own_multiplier(mode: str, multiplier: Decimal) -> None:
    ModelPriceFactory(model="m", input_per_million="2.50", output_per_million="10.00")
    client = ClientFactory(plan=PlanFactory(multipliers={"standard": "1.0"}))
    record = usage_record_create(
        client=client,
        mode=mode,
        step="assess",
        model="m",
        prompt_tokens=1000,
        completion_tokens=100,
    )
    record.refresh_from_db()
    assert record.cost_usd == Decimal("0.00350000")  # 0.0025 + 0.001
    assert record.multiplier == multiplier
    assert record.billed_usd == money(Decimal("0.0035") * multiplier)


def test_unknown_mode_is_refused() -> None:
    client = ClientFactory()
    with pytest.raises(ValueError, match="Unknown AI mode"):
        usage_record_create(
            client=client, mode="turbo", step="x", model="m", prompt_tokens=1, completion_tokens=1
        )


def test_a_price_change_never_rewrites_recorded_cost() -> None:
    ModelPriceFactory(model="m", input_per_million="1", output_per_million="1")
    client = ClientFactory()
    record = usage_record_create(
        client=client,
        mode="standard",
        step="respond",
        model="m",
        prompt_tokens=10**6,
        completion_tokens=0,
    )
    ModelPrice.objects.filter(model="m").update(input_per_million=Decimal("9"))
    record.refresh_from_db()
    assert record.cost_usd == Decimal("1.00000000")


def test_standard_and_adaptive_turns_record_exact_usage_with_their_multipliers(
    standard_shop, shop, llm, django_capture_on_commit_callbacks
) -> None:
    """Through the real pipeline: tokens as the server reported them, cost from ModelPrice,
    billed × the multiplier of the mode that ran."""
    from tests.support.shop import Chat

    llm.script("respond", {"response": "We're open 9-5.", "tool_call": None, "tool_params": {}})
    llm.script("assess", assess(response="We're open 9-5."))
    for client in (standard_shop, shop):
        Chat.new(client, django_capture_on_commit_callbacks).say("When are you open?")
    price = ModelPrice.objects.get(model="gpt-4o-mini")
    for client, call in zip((standard_shop, shop), llm.requests, strict=True):
        record = UsageRecord.objects.get(client=client)
        from devtools.fake_llm import count_prompt_tokens

        assert record.prompt_tokens == count_prompt_tokens(call.messages)
        expected = money(
            (
                record.prompt_tokens * price.input_per_million
                + record.completion_tokens * price.output_per_million
            )
            / Decimal(10**6)
        )
        assert record.cost_usd == expected
        assert record.billed_usd == money(
            expected * client.plan.multiplier_for(client.plan.ai_mode)
        )
        assert record.mode == client.plan.ai_mode
    trace = ReasoningTrace.objects.get(client=shop)
    assert (
        trace.prompt_tokens + trace.completion_tokens
        == UsageRecord.objects.get(client=shop).total_tokens
    )
