"""POST /api/v1/widget/conversations/<id>/rating — the customer's CSAT rating."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import Role as AccountRole
from apps.conversations.models import ConversationRating, Kind, Role
from apps.conversations.services import message_append
from tests.conftest import key_for
from tests.factories import ClientFactory
from tests.support.messages import internal_message
from tests.widget.conftest import API, Widget
from tests.widget.test_widget_api import rates

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


def rate(
    widget: Widget,
    conversation_id: str,
    token: str | None,
    body: object,
    address: str = "127.0.0.1",
    **headers: str,
):
    """Rate as the visitor at `address` (the client address the throttles see)."""
    return widget.http.post(
        f"{API}conversations/{conversation_id}/rating",
        body,
        format="json",
        headers=widget.headers(token, **headers),
        REMOTE_ADDR=address,
    )


def test_a_later_rating_replaces_the_earlier_one_and_the_stored_rating_is_returned(shop_a):
    widget = Widget(shop_a)
    conversation_id, token = started(widget)

    response = rate(widget, conversation_id, token, {"score": 4, "comment": "  Quick, thanks "})
    assert response.status_code == 201, response.content
    assert response.json() == {"score": 4, "comment": "Quick, thanks"}
    rating = ConversationRating.objects.for_client(shop_a).get()
    assert (rating.score, rating.comment) == (4, "Quick, thanks")
    assert rating.conversation.public_id.hex == conversation_id.replace("-", "")

    changed = rate(widget, conversation_id, token, {"score": 5})
    assert changed.status_code == 200, changed.content
    assert changed.json() == {"score": 5, "comment": ""}  # the whole rating is replaced
    assert ConversationRating.objects.for_client(shop_a).get().score == 5

    # Long after the first one, too: still one row, holding the latest rating.
    ConversationRating.objects.for_client(shop_a).update(
        created_at=timezone.now() - timedelta(days=2)
    )
    late = rate(widget, conversation_id, token, {"score": 1, "comment": "Changed my mind"})
    assert late.status_code == 200, late.content
    assert late.json() == {"score": 1, "comment": "Changed my mind"}
    [stored] = ConversationRating.objects.for_client(shop_a)
    assert (stored.pk, stored.score, stored.comment) == (rating.pk, 1, "Changed my mind")


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


@pytest.mark.parametrize(
    ("language", "words"),
    [("en", "nothing to rate"), ("es", "nada que valorar"), ("de", "nichts zu bewerten")],
)
def test_nothing_to_rate_until_the_assistant_or_staff_answered(shop_a, language, words):
    widget = Widget(shop_a)
    conversation_id, token = started(widget, wrote=False)
    conversation = _conversation(widget, conversation_id)
    # The customer wrote, and the assistant only reasoned (internal lines the customer never
    # saw): still nothing to rate.
    message_append(client=shop_a, conversation=conversation, role=Role.USER, text="Hi")
    internal_message(conversation, Kind.ASSESSMENT, "thinking")
    refused = rate(widget, conversation_id, token, {"score": 1}, **{"Accept-Language": language})
    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "nothing_to_rate"
    assert words in error["message"].lower()
    assert not ConversationRating.objects.for_client(shop_a).exists()

    # A staff answer counts as an answer, like the assistant's.
    message_append(client=shop_a, conversation=conversation, role=Role.STAFF, text="Hello!")
    assert rate(widget, conversation_id, token, {"score": 2}).status_code == 201
    assert ConversationRating.objects.for_client(shop_a).get().score == 2


def test_ratings_are_limited_per_visitor_across_their_conversations(shop_a, shop_b, settings):
    rates(settings, widget_ratings="3/hour")
    widget, other_shop = Widget(shop_a), Widget(shop_b)
    visitor, neighbour = "203.0.113.7", "203.0.113.99"
    chats = [started(widget) for _ in range(4)]
    statuses = [rate(widget, cid, token, {"score": 1}, address=visitor) for cid, token in chats]
    assert [s.status_code for s in statuses] == [201, 201, 201, 429]
    assert int(statuses[-1].headers["Retry-After"]) > 0
    assert statuses[-1].json()["error"]["code"] == "throttled"
    assert ConversationRating.objects.for_client(shop_a).count() == 3
    # Replacing a rating counts too: the same conversation cannot be hammered either.
    first_id, first_token = chats[0]
    again = rate(widget, first_id, first_token, {"score": 5}, address=visitor)
    assert again.status_code == 429
    assert ConversationRating.objects.for_client(shop_a).order_by("pk").first().score == 1
    # Another visitor of the same shop, and the same address on another shop's widget, still
    # rate: the limit is per visitor and client.
    last_id, last_token = chats[-1]
    assert rate(widget, last_id, last_token, {"score": 4}, address=neighbour).status_code == 201
    b_id, b_token = started(other_shop)
    assert rate(other_shop, b_id, b_token, {"score": 4}, address=visitor).status_code == 201


def test_the_outcome_figures_count_each_rated_conversation_once(shop_a, shop_b, browser_for):
    widget = Widget(shop_a)
    first, second = started(widget), started(widget)
    for score in (1, 1, 2, 5):  # the same conversation rated four times: the last one counts
        assert rate(widget, *first, {"score": score}).status_code in (200, 201)
    assert rate(widget, *second, {"score": 3}).status_code == 201
    # Another client's visitor rating their own conversation changes nothing of A's figures.
    other = Widget(shop_b)
    assert rate(other, *started(other), {"score": 1}).status_code == 201

    today = timezone.localdate().isoformat()
    api = key_for(shop_a, AccountRole.VIEWER)
    totals = api.get(f"/api/v1/outcomes/?start={today}&end={today}").json()["totals"]
    assert (totals["conversations"], totals["ratings"]) == (2, 2)
    assert (totals["positive_ratings"], totals["rating_average"]) == (1, 4.0)
    # The console's outcomes page shows the same figures.
    page = browser_for(AccountRole.VIEWER, client=shop_a).get(
        f"/console/outcomes/?client={shop_a.slug}&start={today}&end={today}"
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-conversations="2"' in html and 'data-ratings="2"' in html


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
