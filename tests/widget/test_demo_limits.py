"""The demo's limits fit the README's flows: an evaluator who switches the demo shop's plan to
deliberative (README, "Deliberative mode") and tries every message the README suggests — the
"Try it" conversation, the deliberative questions again in a new conversation as the README
advises, the whole tour once more, the Spanish and Hebrew openings — from one address, through
the widget API with every throttle and token window at its default, is never handed to staff
for a limit, and the deliberative question asked in a new conversation deliberates."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.api.views import DEMO_CUSTOMER_ID
from apps.clients.identity import user_hash
from apps.clients.models import Client
from apps.escalations.models import Escalation, EscalationReason
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from apps.reasoning.models import ReasoningTrace
from devtools.benchmarks.demo_tokens import MESSAGES as TRY_IT
from tests.conftest import DEMO_TENANT, ROOT
from tests.widget.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = "http://127.0.0.1:8000"  # the demo shop's own origin (demo/tenant.json)
ADDRESS = "198.51.100.23"
# TRY_IT: the README's "Try it" and "Deliberative mode" messages, in the order it gives them
# (shared with the benchmark that sizes the widget's token windows from them).
# "ask the deliberative questions first, or in a new conversation"
DELIBERATIVE = ["Can I return boots after 40 days?", "Should I get a refund or an exchange?"]
OTHER_LANGUAGES = ["Quiero cancelar mi pedido", "אני רוצה לבטל את ההזמנה"]


@pytest.fixture
def demo(settings) -> Client:
    settings.OPENAI_API_KEY = ""  # the offline demo model, as the README's demo runs
    tenant_import(data=load_tenant_file(DEMO_TENANT))
    client = Client.objects.get(slug="trailhead")
    plan = client.plan
    plan.ai_mode = "deliberative"  # admin → Clients → Plans, as the README says
    plan.save(update_fields=["ai_mode"])
    return client


class Visitor:
    """One evaluator's browser on the demo shop page: signed in as its demo customer."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.http = APIClient()
        self.headers = {"Origin": ORIGIN, "X-Widget-Key": client.widget_key}

    def conversation(self, texts: list[str]) -> list[dict[str, Any]]:
        started = self.http.post(
            f"{API}conversations",
            {
                "customer_id": DEMO_CUSTOMER_ID,
                "user_hash": user_hash(self.client.identity_secret, DEMO_CUSTOMER_ID),
                "new": True,  # the widget's "new conversation", not the one to resume
            },
            format="json",
            headers=self.headers,
            REMOTE_ADDR=ADDRESS,
        )
        assert started.status_code == 201, started.content
        assert not started.json()["resumed"]
        conversation, token = started.json()["id"], started.json()["token"]
        bodies = []
        for text in texts:
            response = self.http.post(
                f"{API}conversations/{conversation}/messages",
                {"text": text},
                format="json",
                headers={**self.headers, "Authorization": f"Bearer {token}"},
                REMOTE_ADDR=ADDRESS,
            )
            assert response.status_code == 201, (text, response.content)
            bodies.append(response.json())
        return bodies


def test_the_messages_are_the_readmes():
    readme = " ".join((ROOT / "README.md").read_text().split())  # lines joined
    for text in [*TRY_IT, *OTHER_LANGUAGES]:
        assert f'"{text}"' in readme, text
    assert "ask the deliberative questions first, or in a new conversation" in readme


def test_the_readmes_tour_is_never_handed_to_staff_for_a_limit(demo):
    visitor = Visitor(demo)

    tour = visitor.conversation(TRY_IT)
    again = visitor.conversation(DELIBERATIVE)
    visitor.conversation(TRY_IT)  # the whole tour once more, for a colleague
    for text in OTHER_LANGUAGES:
        visitor.conversation([text])

    limits = Escalation.objects.for_client(demo).filter(reason=EscalationReason.USAGE_LIMIT)
    assert not limits.exists(), [e.detail for e in limits]
    assert all(body["status"] == "open" for body in [*tour, *again])
    first_turns = ReasoningTrace.objects.for_client(demo).filter(user_message__text=DELIBERATIVE[0])
    second = first_turns.order_by("pk")[1]  # asked again, in the new conversation
    assert second.mode == "deliberative", [(s.name, s.output) for s in second.steps.all()]
    assert not second.steps.filter(name="deliberative_cap").exists()
