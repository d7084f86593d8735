"""Database connections dropped under the Procfile's `web` process with production settings: the
psycopg pool checks each connection as it leaves the pool (`ConnectionPool.check_connection`),
so connections the database terminated while they sat in the pool never reach a request; and a
turn run in the web process (the broker unreachable) whose connections are terminated mid-turn
is retried on a fresh connection and answered."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.db import connection

from apps.conversations.models import Message
from tests.faults.conftest import needs_postgres, production_web, terminate_backends
from tests.support.shop import assess

pytestmark = [
    pytest.mark.faults,
    needs_postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
]
REQUESTS = 60


def test_requests_after_the_pools_connections_are_terminated_all_succeed(widget, tmp_path):
    conversation_id, token = widget.conversation()
    with production_web(tmp_path) as base:
        url = f"{base}/api/v1/widget/conversations/{conversation_id}/messages"
        headers = widget.headers(token)
        # The pool holds connections now (min_size 2, plus the ones these requests opened).
        for _ in range(5):
            assert httpx.get(url, headers=headers, timeout=10).status_code == 200
        assert terminate_backends() >= 1
        connection.close()  # this test's own connection was among them

        statuses = [httpx.get(url, headers=headers, timeout=30).status_code for _ in range(60)]

    assert statuses == [200] * REQUESTS


def test_a_turn_in_the_web_process_survives_its_connections_being_terminated(widget, llm, tmp_path):
    conversation_id, token = widget.conversation()
    terminated: list[int] = []

    def answer_after_a_database_drop(request: Any) -> dict[str, Any]:
        if not terminated:  # every connection of the database drops while the model thinks
            terminated.append(terminate_backends())
        return assess(response="Your parcel ships today.")

    llm.script("assess", answer_after_a_database_drop, answer_after_a_database_drop)
    with production_web(
        tmp_path,
        OPENAI_API_KEY="test-key",
        OPENAI_BASE_URL=llm.base_url,
        LLM_MODEL="gpt-4o-mini",
        LLM_MAX_RETRIES="0",
    ) as base:
        started = time.monotonic()
        response = httpx.post(
            f"{base}/api/v1/widget/conversations/{conversation_id}/messages",
            json={"text": "Where is my parcel?"},
            headers=widget.headers(token),
            timeout=60,
        )
        elapsed = time.monotonic() - started

    assert terminated and terminated[0] >= 1
    assert response.status_code == 201, response.text
    connection.close()
    answers = list(
        Message.objects.unscoped("test checks the database directly")
        .filter(role="assistant", visibility="visible")
        .values_list("kind", "text")
    )
    # A reply or a hand-off, never silence.
    assert answers, "the customer got neither a reply nor a hand-off"
    assert elapsed < 30
    assert (
        Message.objects.unscoped("test checks the database directly").filter(role="user").count()
        == 1
    )
