"""The widget throttle counts tokens, not only requests (denial of wallet): what a visitor's
turns used in the window of `THROTTLE_WIDGET_TOKENS`. Over it, the next message is refused with
429 and Retry-After before it is stored — nothing is stored unanswered."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache

from apps.conversations.models import Message
from tests.reasoning.conftest import assess
from tests.support.fake_llm import WithUsage
from tests.widget.conftest import API, Widget
from tests.widget.test_widget_api import error, rates

pytestmark = pytest.mark.django_db(transaction=True)


def start_from(widget: Widget, address: str) -> tuple[str, str]:
    response = widget.http.post(
        f"{API}conversations", {}, format="json", headers=widget.headers(), REMOTE_ADDR=address
    )
    assert response.status_code == 201, response.content
    return response.json()["id"], response.json()["token"]


def say_from(widget: Widget, address: str, conversation: tuple[str, str], text: str) -> Any:
    conversation_id, token = conversation
    return widget.http.post(
        f"{API}conversations/{conversation_id}/messages",
        {"text": text},
        format="json",
        headers=widget.headers(token),
        REMOTE_ADDR=address,
    )


def costly(text: str, tokens: int) -> WithUsage:
    return WithUsage(assess(response=text), prompt_tokens=tokens - 10, completion_tokens=10)


def test_over_the_token_window_a_message_is_refused_before_it_is_stored(widget, llm, settings):
    rates(settings, widget_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 3_000))
    visitor = "198.51.100.7"
    conversation = start_from(widget, visitor)
    assert say_from(widget, visitor, conversation, "one").status_code == 201  # 3,000 in window
    assert say_from(widget, visitor, conversation, "two").status_code == 201  # 6,000 ≥ 5,000
    calls = len(llm.requests)

    refused = say_from(widget, visitor, conversation, "three")

    assert refused.status_code == 429
    body = error(refused)
    assert body["code"] == "token_limit"
    assert "Please wait a little before you send the next one" in body["message"]
    wait = int(refused.headers["Retry-After"])
    assert 0 < wait <= 3600
    assert (
        not Message.objects.unscoped("test checks the database directly")
        .filter(text="three")
        .exists()
    )  # refused, not stored unanswered
    assert len(llm.requests) == calls
    assert refused.headers["Access-Control-Expose-Headers"] == "Retry-After"

    # a new conversation from the same address is the same visitor
    assert say_from(widget, visitor, start_from(widget, visitor), "four").status_code == 429
    # another visitor of the same tenant is not held back
    other = "203.0.113.9"
    assert say_from(widget, other, start_from(widget, other), "hello").status_code == 201


def test_the_window_is_charged_with_the_tokens_used_and_frees_up_as_they_age(widget, llm, settings):
    rates(settings, widget_tokens="5000/s")  # a one-second window
    llm.default("assess", costly("Sure.", 6_000))
    visitor = "198.51.100.8"
    conversation = start_from(widget, visitor)
    assert say_from(widget, visitor, conversation, "one").status_code == 201
    assert say_from(widget, visitor, conversation, "two").status_code == 429
    time.sleep(1.1)
    assert say_from(widget, visitor, conversation, "three").status_code == 201


def test_ipv6_visitors_count_per_64_prefix(widget, llm, settings):
    rates(settings, widget_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 6_000))
    first = "2001:db8:1:2::1"
    assert say_from(widget, first, start_from(widget, first), "one").status_code == 201
    same_prefix = "2001:db8:1:2:ffff::99"
    assert say_from(widget, same_prefix, start_from(widget, same_prefix), "two").status_code == 429
    other_prefix = "2001:db8:1:3::1"
    assert say_from(widget, other_prefix, start_from(widget, other_prefix), "x").status_code == 201


def test_one_tenants_window_never_holds_a_visitor_back_on_another(shop, llm, settings, webhook):
    """Tenant isolation: the window is per client; what a visitor spent on A's widget does not
    count on B's."""
    from tests.reasoning.conftest import make_shop

    rates(settings, widget_tokens="5000/hour")
    llm.default("assess", costly("Sure.", 6_000))
    other = make_shop("adaptive", webhook.url(), slug="other-shop")
    other.allowed_origins = shop.allowed_origins = ["https://shop.example"]
    other.save()
    shop.save()
    a, b = Widget(shop), Widget(other)
    visitor = "198.51.100.9"
    on_a = start_from(a, visitor)
    assert say_from(a, visitor, on_a, "one").status_code == 201
    assert say_from(a, visitor, on_a, "two").status_code == 429
    assert say_from(b, visitor, start_from(b, visitor), "hello").status_code == 201
    assert Message.objects.filter(client=other, text="hello").exists()


REDIS_URL = django_settings.TEST_BROKER_URL


@pytest.mark.skipif(
    not REDIS_URL.startswith("redis://"), reason="needs Redis (CELERY_BROKER_URL=redis://…)"
)
def test_with_redis_as_the_cache_the_window_lives_in_a_sorted_set(settings):
    """Production's path: one Lua round trip per check or charge (apps/core/throttling.py)."""
    import redis

    from apps.core.throttling import token_window_charge, token_window_key, token_window_wait

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
    rates(settings, widget_tokens="5000/hour")
    key = cache.make_key(token_window_key(client_id=1, visitor="v1"))
    server = redis.Redis.from_url(REDIS_URL)
    server.delete(key)
    try:
        token_window_charge(client_id=1, visitor="v1", tokens=3_000)
        assert token_window_wait(client_id=1, visitor="v1") is None  # 3,000 < 5,000
        token_window_charge(client_id=1, visitor="v1", tokens=3_000)
        wait = token_window_wait(client_id=1, visitor="v1")
        assert wait is not None and 3590 < wait <= 3600  # until the first charge ages out
        assert server.zcard(key) == 2 and 0 < server.pttl(key) <= 3_600_000
        assert token_window_wait(client_id=2, visitor="v1") is None  # another client's window
    finally:
        server.delete(key)
