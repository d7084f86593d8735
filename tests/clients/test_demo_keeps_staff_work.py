"""`make demo` and `make simulate` run `demo_setup` (and `simulate`) on every start: they create
the demo shop when it is absent and never undo what staff changed since — the plan's mode and
budgets, a tool's approval rule, an article staff wrote or edited, the test suite.
`make demo-reset` (`demo_reset`, then `demo_setup --overwrite`) is the one way back."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from apps.clients.models import Client
from apps.knowledge.models import Article, ArticleKind
from apps.simulations.models import SimCase
from apps.tools.models import ClientTool
from tests.conftest import DEMO_TENANT, ROOT

pytestmark = pytest.mark.django_db

DEMO_CASES = ROOT / "demo" / "simulations" / "demo.json"
MAKE_DEMO = ["demo_setup", "--tenant", str(DEMO_TENANT), "--simulations", str(DEMO_CASES)]
STAFF_RULE = {"always": True, "timeout_minutes": 30}
STAFF_TITLE = "Winter opening hours of the Denver showroom"


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def demo(settings) -> Client:
    settings.OPENAI_API_KEY = ""  # the offline demo model, as the Makefile runs it
    run(*MAKE_DEMO)
    return Client.objects.get(slug="trailhead")


def change_as_staff(demo: Client) -> dict[str, Any]:
    """What a team lead does in the admin after trying the demo; what to find afterwards."""
    plan = demo.plan
    plan.ai_mode = "deliberative" if plan.ai_mode != "deliberative" else "standard"
    plan.monthly_token_budget += 12345
    plan.conversation_token_budget += 1000
    plan.save()
    tool = ClientTool.objects.for_client(demo).get(name="cancel_order")
    tool.approval_rule = STAFF_RULE
    tool.save()
    shipped = (
        Article.objects.for_client(demo)
        .filter(source__isnull=True, kind=ArticleKind.ARTICLE)
        .order_by("pk")
        .first()
    )
    assert shipped is not None
    shipped.body += "\n\nEdited by staff."
    shipped.save()
    Article.objects.create(
        client=demo, kind=ArticleKind.ARTICLE, title=STAFF_TITLE, body="Open 10:00–16:00."
    )
    SimCase.objects.for_client(demo).filter(name="order-status").delete()
    return {
        "ai_mode": plan.ai_mode,
        "monthly_token_budget": plan.monthly_token_budget,
        "conversation_token_budget": plan.conversation_token_budget,
        "article": (shipped.pk, shipped.body),
        "cases": SimCase.objects.for_client(demo).count(),
    }


def assert_kept(demo: Client, staff: dict[str, Any]) -> None:
    demo.refresh_from_db()
    plan = demo.plan
    plan.refresh_from_db()
    assert plan.ai_mode == staff["ai_mode"]
    assert plan.monthly_token_budget == staff["monthly_token_budget"]
    assert plan.conversation_token_budget == staff["conversation_token_budget"]
    tool = ClientTool.objects.for_client(demo).get(name="cancel_order")
    assert tool.approval_rule == STAFF_RULE
    pk, body = staff["article"]
    assert Article.objects.for_client(demo).get(pk=pk).body == body
    assert Article.objects.for_client(demo).filter(title=STAFF_TITLE).exists()
    assert SimCase.objects.for_client(demo).count() == staff["cases"]
    assert not SimCase.objects.for_client(demo).filter(name="order-status").exists()


def test_make_demo_and_make_simulate_again_keep_what_staff_changed(demo):
    staff = change_as_staff(demo)
    widget_key = demo.widget_key

    again = run(*MAKE_DEMO)  # `make demo` restarted
    assert_kept(demo, staff)
    assert f"Widget key:  {widget_key}" in again
    assert "issued earlier" in again
    assert "kept as they are" in again

    # `make simulate`: demo_setup as above, then the suite (one case here, to stay quick)
    run(*MAKE_DEMO)
    run("simulate", "--suite", "demo", "--case", "track-shipment", "--no-progress")
    assert_kept(demo, staff)


def test_make_demo_reset_is_the_way_back_to_the_shipped_state(demo):
    shipped_mode = demo.plan.ai_mode
    staff = change_as_staff(demo)

    run("demo_reset", "--tenant", str(DEMO_TENANT))
    run(*MAKE_DEMO, "--overwrite")

    demo.refresh_from_db()
    assert demo.plan.ai_mode == shipped_mode
    assert ClientTool.objects.for_client(demo).get(name="cancel_order").approval_rule == {}
    assert not Article.objects.for_client(demo).filter(title=STAFF_TITLE).exists()
    pk, body = staff["article"]
    assert not Article.objects.for_client(demo).filter(pk=pk, body=body).exists()
    assert SimCase.objects.for_client(demo).filter(name="order-status").exists()


def test_a_demo_shop_deleted_in_the_admin_is_created_again(demo):
    demo.delete()
    output = run(*MAKE_DEMO)
    created = Client.objects.get(slug="trailhead")
    assert "shown only now" in output  # a new shop, a new API key
    assert SimCase.objects.for_client(created).exists()
