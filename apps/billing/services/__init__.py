"""Billing writes. Split by concern: usage records (`usage`), budgets and alerts (`budgets`),
daily rollups (`rollups`). The usual names are re-exported here."""

from apps.billing.services.usage import (
    billed_amount,
    money,
    price_tokens,
    usage_cost,
    usage_record_create,
    usage_records_rebill,
)

__all__ = [
    "billed_amount",
    "money",
    "price_tokens",
    "usage_cost",
    "usage_record_create",
    "usage_records_rebill",
]
