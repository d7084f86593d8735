"""Usage records: one per LLM call, priced at the time of the call."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.core.cache import cache

from apps.billing.models import ModelPrice, UsagePurpose, UsageRecord
from apps.clients.models import Client
from apps.core.tenant_sql import sql_insert

MILLION = Decimal(1_000_000)
# Every LLM call is priced, and the gateway reads the model's context window before each one:
# the price row is cached this long (shared through the cache; saving or deleting a price
# forgets it at once, `ModelPrice.save`).
PRICE_CACHE_SECONDS = 60
PRICE_FIELDS = (
    "model",
    "input_per_million",
    "output_per_million",
    "cached_input_per_million",
    "context_tokens",
)
USD_PLACES = Decimal("0.00000001")  # UsageRecord stores money with 8 decimal places


def money(value: Decimal) -> Decimal:
    """Round to the 8 places usage money is stored with, half up (0.000000005 → 0.00000001)."""
    return value.quantize(USD_PLACES, rounding=ROUND_HALF_UP)


def usage_cost(
    *, model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> Decimal:
    """Provider cost in USD from today's ModelPrice; zero for a model with no price (logged by
    the admin's 'unpriced models' view rather than failing a customer's turn)."""
    price = model_price(model)
    if price is None:
        return Decimal("0")
    return price_tokens(
        price=price,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
    )


def model_price(model: str) -> ModelPrice | None:
    """Today's price of `model` (None: it has none), read at most once a minute."""
    key = ModelPrice.cache_key(model)
    values = cache.get(key)
    if values is None:
        values = ModelPrice.objects.filter(model=model).values(*PRICE_FIELDS).first() or {}
        cache.set(key, values, PRICE_CACHE_SECONDS)
    return ModelPrice(**values) if values else None


def price_tokens(
    *, price: ModelPrice, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> Decimal:
    """Uncached input × input price + cached input × cached-input price + output × output
    price (a model with no cached-input price bills cached tokens at the input price)."""
    cached = max(0, min(cached_tokens, prompt_tokens))
    cached_price = price.cached_input_price
    cost = (
        Decimal(prompt_tokens - cached) * price.input_per_million
        + Decimal(cached) * cached_price
        + Decimal(completion_tokens) * price.output_per_million
    ) / MILLION
    return money(cost)


def billed_amount(*, cost: Decimal, multiplier: Decimal) -> Decimal:
    return money(cost * multiplier)


def usage_record_create(
    *,
    client: Client,
    mode: str,
    step: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    tokens_estimated: bool = False,
    cached_tokens: int = 0,
    purpose: str = UsagePurpose.TURN,
    conversation: Any = None,
    trace: Any = None,
    billed_as: str | None = None,
) -> UsageRecord:
    """Record one LLM call: cost from the model's price now, billed = cost × the plan's
    multiplier for the mode that ran (or for `billed_as`: a "deliberate when needed" turn that
    deliberated bills at the deliberative multiplier), both rounded half up to 8 places.
    `conversation` and `trace` are set for a customer turn only. Callers go through the meter
    (`apps.reasoning.meter`), which also enforces caps and budgets."""
    cached_tokens = max(0, min(cached_tokens, prompt_tokens))
    cost = usage_cost(
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
    )
    multiplier = client.plan.multiplier_for(billed_as or mode)
    return sql_insert(
        "billing.usage_insert",
        UsageRecord(
            client=client,
            conversation=conversation,
            trace=trace,
            purpose=purpose,
            mode=mode,
            step=step,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            tokens_estimated=tokens_estimated,
            cost_usd=cost,
            multiplier=multiplier,
            billed_usd=billed_amount(cost=cost, multiplier=multiplier),
        ),
    )


def usage_records_rebill(*, client: Client, trace: Any, billed_as: str) -> Decimal:
    """Bill the turn's calls recorded so far at the plan's multiplier for `billed_as` (a
    "deliberate when needed" turn that goes on to deliberate: its adaptive pass is billed as
    the deliberative turn it became). Returns how much the billed amount changed. The cost is
    untouched: it is what the provider charged."""
    multiplier = client.plan.multiplier_for(billed_as)
    records = list(UsageRecord.objects.for_client(client).filter(trace=trace))
    delta = Decimal(0)
    for record in records:
        billed = billed_amount(cost=Decimal(record.cost_usd), multiplier=multiplier)
        delta += billed - Decimal(record.billed_usd)
        record.multiplier, record.billed_usd = multiplier, billed
    UsageRecord.objects.bulk_update(records, ["multiplier", "billed_usd"])
    return delta
