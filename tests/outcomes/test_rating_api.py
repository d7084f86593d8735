"""POST /api/v1/widget/conversations/<id>/rating — the customer's CSAT rating."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.conversations.models import ConversationRating, Role
from apps.conversations.services import message_append
from tests.factories import ClientFactory
from tests.widget.conftest import API, Widget

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop_a(plan):
    return ClientFactory(slug="shop-a", plan=plan)


@pytest.fixture
def shop_b(plan):
    return ClientFactory(slug="shop-b", plan=plan)


def started(widget: Widget, *, wrote: bool = True) -> tuple[str, str]:
    conversation_id, token = widget.conversation()
    if wrote:
        conversation = widget.client and _conversation(widget, conversation_id)
        message_append(client=widget.client, conversation=conversation, role=Role.USER, text="Hi")
        message_append(
            client=widget.client, conversation=conversation, role=Role.ASSISTANT, text="Hello!"
        )
    return conversation_id, token


def _conversation(widget: Widget, conversation_id: str):
    from apps.conversations.models import Conversation

    return Conversation.objects.for_client(widget.client).get(public_id=conversation_id)


def rate(widget: Widget, conversation_id: str, token: str | None, body: object, **headers: str):
    return widget.http.post(
        f"{API}conversations/{conversation_id}/rating",
        body,
        format="json",
        headers=widget.headers(token, **headers),
    )


def test_the_customer_rates_once_and_may_change_it_for_a_while(shop_a):
    widget = Widget(shop_a)
    conversation_id, token = started(widget)

    response = rate(widget, conversation_id, token, {"score": 4, "comment": "  Quick, thanks "})
    assert response.status_code == 201, response.content
    assert response.json() == {"score": 4, "comment": "Quick, thanks"}
    rating = ConversationRating.objects.for_client(shop_a).get()
    assert (rating.score, rating.comment) == (4, "Quick, thanks")
    assert rating.conversation.public_id.hex == conversation_id.replace("-", "")

    changed = rate(widget, conversation_id, token, {"score": 5})
    assert changed.status_code == 200
    assert ConversationRating.objects.for_client(shop_a).get().score == 5

    ConversationRating.objects.for_client(shop_a).update(
        created_at=timezone.now() - timedelta(minutes=11)
    )
    late = rate(widget, conversation_id, token, {"score": 1})
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "already_rated"
    assert ConversationRating.objects.for_client(shop_a).get().score == 5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"score": 0}, "score"),
        ({"score": 6}, "score"),
        ({"score": "5.5"}, "score"),
        ({"score": True}, "score"),
        ({"score": None}, "score"),
        ({}, "score"),
        ({"score": 3, "comment": "x" * 1001}, "comment"),
        ({"score": 3, "comment": 12}, "comment"),
    ],
)
def test_a_bad_score_or_comment_is_a_400_naming_the_field(shop_a, body, field):
    widget = Widget(shop_a)
    conversation_id, token = started(widget)
    response = rate(widget, conversation_id, token, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not ConversationRating.objects.for_client(shop_a).exists()


def test_nothing_to_rate_before_the_customer_wrote(shop_a):
    widget = Widget(shop_a)
    conversation_id, token = started(widget, wrote=False)
    response = rate(widget, conversation_id, token, {"score": 5})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "nothing_to_rate"


def test_another_visitors_token_or_another_clients_key_cannot_rate(shop_a, shop_b):
    widget_a, widget_b = Widget(shop_a), Widget(shop_b)
    conversation_id, token = started(widget_a)
    _, other_token = started(widget_a)
    # Another visitor of the same shop: their token does not open this conversation.
    assert rate(widget_a, conversation_id, other_token, {"score": 1}).status_code == 404
    # Another client's widget key, even with the right visitor token: 404 like a missing one.
    assert rate(widget_b, conversation_id, token, {"score": 1}).status_code == 404
    # No token at all.
    assert rate(widget_a, conversation_id, None, {"score": 1}).status_code == 401
    assert not ConversationRating.objects.for_client(shop_a).exists()
    assert not ConversationRating.objects.for_client(shop_b).exists()
