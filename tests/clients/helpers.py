"""The demo shop as the README runs it: set up from the shipped tenant file on the offline demo
model, and whole turns in it as the demo shop page's customer."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import call_command

from apps.api.views import DEMO_CUSTOMER_ID
from apps.clients.identity import Identity
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.conversations.services import conversation_create, conversation_customer_verify
from apps.reasoning.services import handle_turn
from tests.conftest import DEMO_TENANT


def demo_shop(settings: Any) -> Client:
    """The demo shop, set up as `make demo` does, on the offline demo model (as in the README);
    `settings`: pytest-django's fixture."""
    settings.OPENAI_API_KEY = ""
    call_command("demo_setup", "--tenant", str(DEMO_TENANT), stdout=StringIO())
    return Client.objects.get(slug="trailhead")


def demo_turns(
    client: Client, capture: Any, texts: list[str], *, signed_in: bool = True
) -> tuple[Conversation, Message]:
    """The customer's `texts`, one turn each, in a new conversation — with `signed_in`, the demo
    shop page's signed-in demo customer's, as the page signs it (docs/widget.md "Identity
    verification"). The conversation and the customer's last message."""
    conversation = conversation_create(client=client)[0]
    if signed_in:
        conversation_customer_verify(
            client=client,
            conversation=conversation,
            identity=Identity(customer_id=DEMO_CUSTOMER_ID, email="", name="", via="hmac"),
        )
    for text in texts:
        with capture(execute=True):
            message = handle_turn(client=client, conversation=conversation, text=text)
    return conversation, message


def one_shop_tenant(plan: str, **client: Any) -> dict[str, Any]:
    """A tenant file of one standard-mode plan, slug `plan`, and one client on it: `client` is
    the client's entry (its slug, name, …) without the plan."""
    return {
        "plans": [{"slug": plan, "name": plan.title(), "ai_mode": "standard"}],
        "clients": [{**client, "plan": plan}],
    }
