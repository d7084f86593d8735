"""A turn published to the real broker (Redis in CI) and run by a real Celery worker thread.

Skipped when no broker is configured (the local `make test` without CELERY_BROKER_URL); CI sets
CELERY_BROKER_URL to its Redis, so this runs there."""

from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from apps.conversations.models import Message
from apps.conversations.services import conversation_create
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import handle_turn
from config.celery import app as celery_app
from tests.support.shop import assess

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.TEST_BROKER_URL,
        reason="no CELERY_BROKER_URL: the broker round-trip runs in CI (Redis)",
    ),
]


def _reset_connections() -> None:
    # Connections and producers are cached per broker URL; drop them when the URL changes.
    if celery_app._pool is not None:
        celery_app._pool.force_close_all()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def worker_app():
    previous = {k: celery_app.conf[k] for k in ("broker_url", "task_always_eager")}
    celery_app.conf.update(broker_url=settings.TEST_BROKER_URL, task_always_eager=False)
    _reset_connections()
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield celery_app
    finally:
        celery_app.conf.update(previous)
        _reset_connections()


def test_turn_runs_on_a_real_worker(shop, llm, worker_app):
    conversation, _ = conversation_create(client=shop)
    llm.script("assess", assess(response="Hello from the worker!"))
    message = handle_turn(client=shop, conversation=conversation, text="Hi")
    # The request returned before the turn ran: the message is stored, the reply comes later.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        reply = Message.objects.filter(
            conversation=conversation, role="assistant", visibility="visible"
        ).first()
        if reply is not None:
            break
        time.sleep(0.1)
    assert reply is not None, "the worker did not answer within 15 s"
    assert reply.text == "Hello from the worker!"
    assert ReasoningTrace.objects.get(user_message=message).status == "done"
