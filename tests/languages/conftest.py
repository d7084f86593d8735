"""The widget client fixture, re-exported (the shop and its servers: tests/support/shop.py), and
a customer message sent through it."""

from __future__ import annotations

from typing import Any

from tests.widget.conftest import Widget, widget  # noqa: F401


def say(widget: Widget, conversation_id: str, token: str, text: str) -> dict[str, Any]:  # noqa: F811
    """`text` sent as the customer through the widget API, which must accept it: the body."""
    response = widget.say(conversation_id, token, text)
    assert response.status_code == 201, response.content
    return response.json()
