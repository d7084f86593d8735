"""What GuideDesk itself says around a tool, in a real browser, in Spanish: a customer of the demo
shop writes in Spanish in the widget and asks to cancel an order; the confirmation question is a
Spanish sentence with the tool's Spanish display name and label (from demo/tenant.json), and
after "Sí" the result gives the refund by Spanish rules. The offline demo model answers, as in
the README. Screenshot: ci-artifacts/screenshots/spanish-confirmation.png."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from apps.conversations.models import Kind
from apps.tools.models import ToolExecution
from tests.browser.helpers import shown_conversation
from tests.browser.test_widget_i18n_browser import ORDER, host_page, open_chat, send, words

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_spanish_cancellation_is_confirmed_in_spanish_words(
    browser: Any, live_server, demo, settings, screenshots
):
    settings.OPENAI_API_KEY = ""  # the labelled offline demo model answers
    w = words("es")
    page = browser.new_page(viewport={"width": 1280, "height": 860}, locale="es-ES")
    host_page(page, live_server.url, demo, "es")
    frame = open_chat(page, "es")

    send(frame, "es", f"Quiero cancelar mi pedido {ORDER}")
    confirmation = frame.locator("li.gd-kind--confirmation_request")
    expect(confirmation).to_contain_text("¿desea que realice la acción «Cancelar el pedido»")
    expect(confirmation).to_contain_text(f"(número de pedido: {ORDER})")
    expect(confirmation).to_contain_text("Responda «sí» para continuar")
    text = confirmation.locator(".gd-text").inner_text()
    for english in ("cancel order", "cancel_order", "order id", "Just to confirm"):
        assert english not in text, text
    yes = confirmation.get_by_role("button", name=w["yes"], exact=True)
    expect(yes).to_be_visible()
    conversation = shown_conversation(frame, demo)
    question = conversation.messages.get(kind=Kind.CONFIRMATION_REQUEST)
    assert question.language == "es"

    screenshots.mkdir(parents=True, exist_ok=True)
    path = screenshots / "spanish-confirmation.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 5_000

    yes.click()
    done = frame.locator("li.gd-msg--assistant").filter(has_text=f"El pedido {ORDER}")
    expect(done).to_contain_text("ha sido cancelado")
    execution = ToolExecution.objects.for_client(demo).get(
        params={"order_id": ORDER}, tool__name="cancel_order"
    )
    assert execution.status == "succeeded" and execution.result is not None
    refund = execution.result["refund"].replace(".", ",")  # 123.45 → "123,45 US$"
    expect(done).to_contain_text(f"{refund}\xa0US$")
    page.close()
