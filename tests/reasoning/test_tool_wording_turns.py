"""Whole turns on the demo shop with the offline demo model (as in the README), in Spanish: the
confirmation names the demo tool by its Spanish display name and label, and a refusal from the
demo's order book reaches the customer as a Spanish sentence, never the tool's English error."""

from __future__ import annotations

from typing import Any

import pytest

from apps.clients.models import Client
from apps.conversations.models import Kind, Message
from apps.tools.builtins import get_order_status
from apps.tools.models import ToolExecution
from tests.clients.helpers import demo_shop, demo_turns

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings) -> Client:
    return demo_shop(settings)


def order_in(client: Client, status: str) -> str:
    return next(
        order_id
        for order_id in (f"TH-{n:05d}" for n in range(10001, 10200))
        if get_order_status(client=client, params={"order_id": order_id})["status"] == status
    )


def turns(client: Client, capture: Any, *texts: str) -> list[Message]:
    """The customer's messages, one turn each, in a conversation of the demo's signed-in
    customer; every visible reply, in order."""
    conversation, _ = demo_turns(client, capture, list(texts))
    return list(
        Message.objects.filter(conversation=conversation, role="assistant")
        .visible()
        .order_by("seq")
    )


def test_a_delivered_order_is_refused_in_spanish(demo, django_capture_on_commit_callbacks):
    # The demo's cancel tool declares a precondition: the order's state is read first, and a
    # delivered order is refused in the customer's words before any question is asked.
    order = order_in(demo, "delivered")
    [refusal] = turns(
        demo, django_capture_on_commit_callbacks, f"Quiero cancelar mi pedido {order}"
    )
    assert refusal.kind != Kind.CONFIRMATION_REQUEST
    assert refusal.language == "es"
    assert refusal.text == (
        f"Lo siento, «Cancelar el pedido» no es posible para número de pedido {order}: su "
        "estado es entregado. No se ha cambiado nada."
    )
    [read] = ToolExecution.objects.for_client(demo)
    assert read.tool.name == "get_order_status"  # the cancel tool never ran


def test_a_cancellation_is_told_with_a_spanish_amount(demo, django_capture_on_commit_callbacks):
    order = order_in(demo, "processing")
    *_, done = turns(
        demo,
        django_capture_on_commit_callbacks,
        f"Quiero cancelar mi pedido {order}",
        "Sí, cancélelo por favor",
    )
    execution = ToolExecution.objects.for_client(demo).get(tool__name="cancel_order")
    assert execution.status == "succeeded" and execution.result is not None
    amount = execution.result["refund"].replace(".", ",")
    assert done.text.startswith(f"¡Hecho! El pedido {order} ha sido cancelado.")
    assert f"El reembolso de {amount}\xa0US$ volverá" in done.text
    assert "$" + execution.result["refund"] not in done.text  # not the English "$123.45"
