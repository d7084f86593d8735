"""The evaluation layer in a playground run (`manage.py reason`): a knowledge answer is checked
as in a real turn, nothing reaches a customer, and no turn's trace is touched; an answer that
would need a tool (which never runs in the playground) is not evaluated."""

from __future__ import annotations

import pytest

from apps.billing.models import UsageRecord
from apps.clients.models import Plan
from apps.reasoning.models import ReasoningTrace, TraceKind
from tests.factories import ModelPriceFactory
from tests.playground.conftest import reason
from tests.support.shop import assess

pytestmark = pytest.mark.django_db

ANSWER = (
    "You can return any unused item within 30 days of delivery for a full refund; we email you "
    "a free return label."
)


def test_a_playground_answer_is_evaluated_without_touching_any_turn(shop, llm):
    ModelPriceFactory(model="gpt-4o-mini")
    Plan.objects.filter(pk=shop.plan_id).update(evaluation_enabled=True)
    llm.script("assess", assess(response=ANSWER, confidence=8))
    llm.script(
        "evaluate",
        {"valid": True, "improved_response": None, "improved_confidence": 0, "evaluation": "ok"},
    )

    out = reason("--client", "shop", "--mode", "adaptive", "How do returns work?")

    assert [r.step for r in llm.requests] == ["assess", "evaluate"]
    assert "evaluate" in out
    assert (
        ReasoningTrace.objects.unscoped("test checks the database directly")
        .filter(kind=TraceKind.TURN)
        .count()
        == 0
    )
    assert set(
        UsageRecord.objects.unscoped("test checks the database directly").values_list(
            "step", "purpose"
        )
    ) == {
        ("assess", "playground"),
        ("evaluate", "playground"),
    }


def test_an_answer_waiting_on_a_tool_is_not_evaluated_in_the_playground(shop, llm):
    ModelPriceFactory(model="gpt-4o-mini")
    Plan.objects.filter(pk=shop.plan_id).update(evaluation_enabled=True)
    llm.script(
        "assess",
        assess(
            response="Let me look that order up for you right away, it will only take a moment "
            "to check its status.",
            confidence=9,
            tool_call="get_order_status",
            tool_params={"order_id": "TH-12345"},
        ),
    )

    reason("--client", "shop", "--mode", "adaptive", "Where is order TH-12345?")

    assert [r.step for r in llm.requests] == ["assess"]
