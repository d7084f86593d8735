"""The widget's token windows count tokens, not only requests (denial of wallet): what the turns
of one conversation used in the window of `THROTTLE_WIDGET_TOKENS`, and what the turns of one
client address used in the much larger `THROTTLE_WIDGET_ADDRESS_TOKENS`. Reaching either never
locks the customer out: the message is stored and handed to staff with a short, translated
notice (the widget then offers the e-mail field), and no model is called."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.cache import cache

from apps.conversations.models import Conversation, ConversationStatus, Kind, Message
from apps.escalations.models import Escalation, EscalationReason, EscalationStatus
from apps.reasoning.models import ReasoningTrace
from devtools.fake_llm import WithUsage
from tests.support.broker import NEEDS_REDIS, REDIS_URL
from tests.support.shop import assess
from tests.widget.conftest import API, Widget, say_from, start_from
from tests.widget.test_widget_api import rates

pytestmark = pytest.mark.django_db(transaction=True)

NOTICE = "You've sent a lot in a short time, so I've passed your conversation to our team"


def costly(text: str, tokens: int) -> WithUsage:
    return WithUsage(assess(response=text), prompt_tokens=tokens - 10, completion_tokens=10)


def answered(response: Any) -> bool:
    """The model answered: 201 with an assistant text reply, the conversation still open."""
    body = response.json()
    return (
        response.status_code == 201
        and body["status"] == ConversationStatus.OPEN
        and [r["kind"] for r in body["replies"]] == [Kind.TEXT]
    )


def handed_off(response: Any) -> str:
    """The hand-off notice of a message the token window sent to staff ('' if it was not)."""
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == ConversationStatus.ESCALATED, body
    (notice,) = [r for r in body["replies"] if r["kind"] == Kind.HANDOFF]
    return notice["text"]


def test_over_the_conversation_window_the_message_is_stored_and_handed_to_staff(
    widget, llm, settings
):
    rates(settings, widget_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 3_000))
    visitor = "198.51.100.7"
    conversation = start_from(widget, visitor)
    assert answered(say_from(widget, visitor, conversation, "one"))  # 3,000 in the window
    assert answered(say_from(widget, visitor, conversation, "two"))  # 6,000 ≥ 5,000
    calls = len(llm.requests)

    over = say_from(widget, visitor, conversation, "three")

    assert NOTICE in handed_off(over)  # a short notice and a person: never a bare 429
    assert len(llm.requests) == calls  # no model call
    stored = Message.objects.unscoped("test checks the database directly").get(text="three")
    assert stored.data["token_window"]["window"] == "conversation"
    escalation = Escalation.objects.unscoped("test").get(conversation_id=stored.conversation_id)
    assert escalation.reason == EscalationReason.USAGE_LIMIT
    assert escalation.status == EscalationStatus.OPEN
    assert "token window of the conversation reached: 6,000 tokens" in escalation.detail
    trace = ReasoningTrace.objects.unscoped("test").get(user_message=stored)
    assert trace.steps.get(name="token_window").output["limit"] == 5_000
    # The conversation stays with staff, who answer it; the widget asks for an e-mail address
    # (shown while it is escalated) and the customer can leave one for their reply.
    contact = widget.http.post(
        f"{API}conversations/{conversation[0]}/contact",
        {"email": "customer@example.com"},
        format="json",
        headers=widget.headers(conversation[1]),
        REMOTE_ADDR=visitor,
    )
    assert contact.status_code == 200, contact.content
    later = say_from(widget, visitor, conversation, "four")  # waits for staff, stored
    assert later.status_code in (201, 202) and len(llm.requests) == calls
    assert Escalation.objects.unscoped("test").filter(conversation=escalation.conversation_id)
    assert Escalation.objects.unscoped("test").count() == 1


def test_the_notice_is_in_the_customers_language(widget, shop, llm, settings):
    shop.language, shop.languages = "en", ["en", "es"]
    shop.save(update_fields=["language", "languages"])
    rates(settings, widget_tokens="5000/hour")
    llm.default("assess", costly("Claro.", 6_000))
    visitor = "198.51.100.17"
    conversation = start_from(widget, visitor)
    assert answered(say_from(widget, visitor, conversation, "Hola, quiero devolver mis botas"))

    notice = handed_off(
        say_from(widget, visitor, conversation, "Hola, ¿dónde está mi pedido, por favor?")
    )

    assert "he pasado su conversación a nuestro equipo" in notice
    assert NOTICE not in notice


def test_another_conversation_from_the_same_address_has_its_own_window(widget, llm, settings):
    """One office or carrier address is many customers: one customer's window never holds back
    the next one behind the same address (it did: every conversation of the address got 429)."""
    rates(settings, widget_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 6_000))
    office = "198.51.100.8"
    first = start_from(widget, office)
    assert answered(say_from(widget, office, first, "one"))
    assert NOTICE in handed_off(say_from(widget, office, first, "two"))

    colleague = start_from(widget, office)
    assert answered(say_from(widget, office, colleague, "hello"))


def test_the_address_ceiling_bounds_what_new_conversations_can_spend(widget, llm, settings):
    rates(settings, widget_tokens="5000/hour", widget_address_tokens="8000/hour")
    llm.default("assess", costly("Sure.", 3_000))
    address = "198.51.100.9"
    for n in range(3):  # 3,000, 6,000, 9,000 ≥ 8,000: each in a new conversation
        assert answered(say_from(widget, address, start_from(widget, address), f"m{n}"))
    calls = len(llm.requests)

    notice = handed_off(say_from(widget, address, start_from(widget, address), "again"))

    assert NOTICE in notice and len(llm.requests) == calls
    stored = Message.objects.unscoped("test").get(text="again")
    assert stored.data["token_window"]["window"] == "address"
    other = "203.0.113.9"  # another address of the same tenant is not held back
    assert answered(say_from(widget, other, start_from(widget, other), "hello"))


def test_the_default_windows_hold_the_readmes_deliberative_demo(widget, llm, settings):
    """With the default rates, ≈ 100k tokens from one address within an hour — three
    deliberative turns of the README's demo — no longer hold back the same conversation's next
    message or a new conversation from that address (both got 429 "available in 3400
    seconds")."""
    llm.default("assess", costly("Sure.", 35_000))
    address = "198.51.100.10"
    conversation = start_from(widget, address)
    for text in ("one", "two", "three"):  # 105,000 tokens
        assert answered(say_from(widget, address, conversation, text))

    assert answered(say_from(widget, address, conversation, "four"))
    assert answered(say_from(widget, address, start_from(widget, address), "new"))


def test_the_window_is_charged_with_the_tokens_used_and_frees_up_as_they_age(widget, llm, settings):
    rates(settings, widget_tokens="5000/s", widget_address_tokens="5000/s")  # one-second windows
    llm.default("assess", costly("Sure.", 6_000))
    visitor = "198.51.100.11"
    assert answered(say_from(widget, visitor, start_from(widget, visitor), "one"))
    assert NOTICE in handed_off(say_from(widget, visitor, start_from(widget, visitor), "two"))
    time.sleep(1.1)
    assert answered(say_from(widget, visitor, start_from(widget, visitor), "three"))


def test_ipv6_addresses_count_per_64_prefix(widget, llm, settings):
    rates(settings, widget_address_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 6_000))
    first = "2001:db8:1:2::1"
    assert answered(say_from(widget, first, start_from(widget, first), "one"))
    same_prefix = "2001:db8:1:2:ffff::99"
    assert NOTICE in handed_off(
        say_from(widget, same_prefix, start_from(widget, same_prefix), "two")
    )
    other_prefix = "2001:db8:1:3::1"
    assert answered(say_from(widget, other_prefix, start_from(widget, other_prefix), "x"))


def test_one_tenants_window_never_holds_a_visitor_back_on_another(shop, llm, settings, webhook):
    """Tenant isolation: the windows are per client; what an address spent on A's widget does
    not count on B's, and B's staff get nothing of A's."""
    from tests.support.shop import make_shop

    rates(settings, widget_address_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 6_000))
    other = make_shop("adaptive", webhook.url(), slug="other-shop")
    other.allowed_origins = shop.allowed_origins = ["https://shop.example"]
    other.save()
    shop.save()
    a, b = Widget(shop), Widget(other)
    visitor = "198.51.100.12"
    assert answered(say_from(a, visitor, start_from(a, visitor), "one"))
    assert NOTICE in handed_off(say_from(a, visitor, start_from(a, visitor), "two"))
    assert answered(say_from(b, visitor, start_from(b, visitor), "hello"))
    assert Message.objects.filter(client=other, text="hello").exists()
    assert not Escalation.objects.filter(client=other).exists()
    assert Escalation.objects.filter(client=shop).count() == 1
    assert not Conversation.objects.filter(client=other, status=ConversationStatus.ESCALATED)


@NEEDS_REDIS
def test_with_redis_as_the_cache_the_windows_live_in_sorted_sets(settings):
    """Production's path: one Lua round trip per check or charge, both windows in it
    (apps/platform/throttling.py)."""
    import redis

    from apps.platform.throttling import (
        address_token_window_key,
        token_window_charge,
        token_window_key,
        token_window_reached,
    )

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
    rates(settings, widget_tokens="5000/hour", widget_address_tokens="8000/hour")
    conversation = cache.make_key(token_window_key(client_id=1, conversation_id=7))
    address = cache.make_key(address_token_window_key(client_id=1, visitor="v1"))
    server = redis.Redis.from_url(REDIS_URL)
    server.delete(conversation, address)
    try:
        token_window_charge(client_id=1, conversation_id=7, visitor="v1", tokens=3_000)
        assert token_window_reached(client_id=1, conversation_id=7, visitor="v1") is None
        token_window_charge(client_id=1, conversation_id=7, visitor="v1", tokens=3_000)
        reached = token_window_reached(client_id=1, conversation_id=7, visitor="v1")
        assert reached is not None and reached.window == "conversation"
        assert (reached.used, reached.limit) == (6_000, 5_000)
        assert 3590 < reached.wait <= 3600  # until the first charge ages out
        assert server.zcard(conversation) == 2 and 0 < server.pttl(conversation) <= 3_600_000
        assert server.zcard(address) == 2
        # another conversation of the address: under its own window, under the address's
        assert token_window_reached(client_id=1, conversation_id=8, visitor="v1") is None
        token_window_charge(client_id=1, conversation_id=8, visitor="v1", tokens=3_000)
        reached = token_window_reached(client_id=1, conversation_id=9, visitor="v1")
        assert reached is not None and (reached.window, reached.used) == ("address", 9_000)
        assert token_window_reached(client_id=2, conversation_id=7, visitor="v1") is None
    finally:
        server.delete(
            conversation,
            address,
            cache.make_key(token_window_key(client_id=1, conversation_id=8)),
        )
