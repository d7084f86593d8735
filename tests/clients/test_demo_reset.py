"""`manage.py demo_reset` (`make demo-reset`): the README's cancellation runs
again after a reset; the reset is idempotent, restores the shipped plan, and refuses — changing
nothing — a client that is not a demo shop. Other clients are never touched."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.clients.models import Client
from apps.conversations.models import Conversation, Message
from apps.conversations.services import (
    conversation_create,
    message_append,
)
from apps.provisioning.files import load_tenant_file
from apps.reasoning.services import handle_turn
from apps.tools.models import ToolExecution
from tests.clients.helpers import demo_shop, demo_turns
from tests.conftest import DEMO_TENANT
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings) -> Client:
    return demo_shop(settings)


README_CANCELLATION = ["Cancel my order", "Order 12345", "Yes"]


def cancel_as_in_the_readme(
    client: Client, capture: Any, *, signed_in: bool = True, texts: list[str] = README_CANCELLATION
) -> str:
    """The README's three turns in a new conversation — the demo shop page's signed-in demo
    customer's, as the page signs it (docs/widget.md "Identity verification"); the last
    visible reply."""
    conversation, message = demo_turns(client, capture, texts, signed_in=signed_in)
    reply = (
        Message.objects.filter(conversation=conversation, seq__gt=message.seq)
        .visible()
        .order_by("-seq")
        .first()
    )
    assert reply is not None
    return reply.text


def demo_reset(*args: str) -> str:
    out = StringIO()
    call_command("demo_reset", *args, stdout=out)
    return out.getvalue()


def test_the_cancellation_runs_again_after_a_reset(demo, django_capture_on_commit_callbacks):
    # Checked on the tool runs, not the reply's words: the reply is in the language the
    # conversation settled on (apps/core/languages.py), which the README's turns leave open.
    first = cancel_as_in_the_readme(demo, django_capture_on_commit_callbacks)
    cancelled = ToolExecution.objects.filter(client=demo).latest("created_at")
    assert cancelled.result is not None
    assert cancelled.status == "succeeded" and cancelled.result["status"] == "cancelled"
    assert cancelled.result["refund"].replace(".", ",")[-5:] in first.replace(".", ",")
    # The demo's order book remembers: the order is read before the question, and the customer
    # is told it is cancelled already instead of being asked to confirm.
    again = cancel_as_in_the_readme(
        demo, django_capture_on_commit_callbacks, texts=README_CANCELLATION[:2]
    )
    assert "isn't possible for order number TH-12345: its status is cancelled" in again

    output = demo_reset()
    # the first time: the status read and the cancellation; the second: the status read
    assert "trailhead: removed 2 conversation(s), 3 tool run(s)" in output
    assert Conversation.objects.filter(client=demo).count() == 0
    assert ToolExecution.objects.filter(client=demo).count() == 0

    after = cancel_as_in_the_readme(demo, django_capture_on_commit_callbacks)
    assert after == first  # the same order, cancelled again, told the same way


def test_the_reset_is_idempotent_and_restores_the_shipped_plan(demo):
    shipped_mode = demo.plan.ai_mode
    demo.plan.ai_mode = "deliberative" if shipped_mode != "deliberative" else "standard"
    demo.plan.save(update_fields=["ai_mode"])
    widget_key = demo.widget_key

    demo_reset()
    assert "removed 0 conversation(s), 0 tool run(s) and 0 note(s)" in demo_reset()
    demo.refresh_from_db()
    assert demo.plan.ai_mode == shipped_mode
    assert demo.widget_key == widget_key  # the printed keys keep working


def test_other_clients_are_never_touched(demo, client_b, django_capture_on_commit_callbacks):
    cancel_as_in_the_readme(demo, django_capture_on_commit_callbacks)
    theirs = conversation_create(client=client_b)[0]
    message_append(client=client_b, conversation=theirs, role="user", text="Hello")

    demo_reset()
    assert Conversation.objects.filter(client=client_b).count() == 1
    assert Message.objects.filter(client=client_b).count() == 1


def test_a_client_that_is_not_a_demo_shop_is_refused(demo, tmp_path: Path):
    data = load_tenant_file(DEMO_TENANT)
    real = ClientFactory(slug="real-shop", name="Real Shop")
    conversation_create(client=real)
    copy = json.loads(json.dumps(data["clients"][0]))
    copy.update(slug="real-shop", name="Real Shop")
    copy["tools"] = [t for t in copy["tools"] if t["executor"]["type"] != "builtin"]
    data["clients"].append(copy)
    tenant = tmp_path / "tenant.json"
    tenant.write_text(json.dumps(data), encoding="utf-8")
    demo_conversation = conversation_create(client=demo)[0]

    with pytest.raises(CommandError, match="not a demo shop"):
        demo_reset("--tenant", str(tenant))
    assert Conversation.objects.filter(client=real).count() == 1
    assert (
        Conversation.objects.unscoped("test checks the database directly")
        .filter(pk=demo_conversation.pk)
        .exists()
    )  # all or nothing


def test_the_reset_gives_the_demo_visitor_a_fresh_daily_budget(demo):
    """A visitor who spent the day's budget in the README's flows may chat again after it."""
    from apps.billing.models import VisitorUsage
    from apps.billing.periods import today

    VisitorUsage.objects.create(
        client=demo, day=today(), visitor="v" * 64, tokens_used=demo.plan.visitor_daily_token_budget
    )
    demo_reset()
    assert not VisitorUsage.objects.for_client(demo).exists()


def test_an_anonymous_visitor_cannot_cancel_in_the_demo(demo, django_capture_on_commit_callbacks):
    """The demo's cancel tool is customer scoped: signed out (`/?as=anonymous`), the visitor is
    told to sign in and nothing runs, whatever they answer."""
    conversation = conversation_create(client=demo)[0]
    replies = []
    for text in README_CANCELLATION:
        with django_capture_on_commit_callbacks(execute=True):
            message = handle_turn(client=demo, conversation=conversation, text=text)
        replies += [
            m.text
            for m in Message.objects.filter(conversation=conversation, seq__gt=message.seq)
            .visible()
            .order_by("seq")
        ]
    assert "sign in at http://127.0.0.1:8000/" in replies[0]
    assert not any("has been cancelled" in r for r in replies)
    assert ToolExecution.objects.filter(client=demo).count() == 0
