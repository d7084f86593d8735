"""A tenant file may give a model's context window; leaving it out keeps what the admin set."""

from __future__ import annotations

from typing import Any

import pytest

from apps.billing.models import ModelPrice
from apps.core.exceptions import ApplicationError
from apps.provisioning.services import tenant_import

pytestmark = pytest.mark.django_db

PRICE: dict[str, Any] = {
    "model": "smollm2-135m",
    "input_per_million": "0",
    "output_per_million": "0",
}


def stored() -> ModelPrice:
    return ModelPrice.objects.get(model="smollm2-135m")


def test_context_tokens_is_imported_and_kept_when_left_out() -> None:
    tenant_import(data={"model_prices": [{**PRICE, "context_tokens": 4096}]})
    assert stored().context_tokens == 4096

    tenant_import(data={"model_prices": [PRICE]})
    assert stored().context_tokens == 4096

    tenant_import(data={"model_prices": [{**PRICE, "context_tokens": None}]})
    assert stored().context_tokens is None


def test_a_context_window_below_one_token_is_refused() -> None:
    with pytest.raises(ApplicationError):
        tenant_import(data={"model_prices": [{**PRICE, "context_tokens": 0}]})
    assert not ModelPrice.objects.filter(model="smollm2-135m").exists()
