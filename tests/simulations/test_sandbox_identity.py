"""Simulated customers and identity (docs/simulations.md): a case's customer is a verified
sandbox customer, so a customer-scoped tool behaves as for a signed-in customer; a case tagged
`anonymous` plays an anonymous visitor, for whom the guards refuse it and the reply is the
sign-in text — nothing runs, not even the stub."""

from __future__ import annotations

import pytest

from apps.simulations.models import CaseRun
from apps.tools.models import ClientTool
from tests.simulations.conftest import UNSCOPED, make_case, run_now
from tests.support.shop import lookup_assess

pytestmark = pytest.mark.django_db

TURNS = [{"customer": "What's the status of TH-12345?"}]
STUBS = {"get_order_status": {"ok": True, "result": {"status": "shipped"}}}


@pytest.fixture
def scoped_shop(shop):
    ClientTool.objects.for_client(shop).filter(name="get_order_status").update(customer_scoped=True)
    return shop


def script(llm) -> None:
    llm.script("assess", lookup_assess(response="Let me look."))


@pytest.mark.parametrize(("tags", "runs"), [([], True), (["anonymous"], False)])
def test_the_simulated_customer_is_verified_unless_the_case_says_anonymous(
    scoped_shop, llm, webhook, tags, runs
):
    make_case(scoped_shop, "status", turns=TURNS, tools=STUBS, tags=tags)
    script(llm)
    if runs:
        llm.script("compose", {"response": "It has shipped."})
    run_now(scoped_shop, compare=False)
    [entry] = CaseRun.objects.unscoped(UNSCOPED).get().transcript
    ran = [t["name"] for t in entry["tools_ran"]]
    assert ran == (["get_order_status"] if runs else [])
    if not runs:
        assert "sign in" in entry["reply"]
    assert webhook.requests == []
