"""Idle connections dropped (a database restart or a pooler recycling them while no request
runs): a real server process with persistent connections (CONN_MAX_AGE=60, as in production)
keeps answering — CONN_HEALTH_CHECKS replaces the dead connection before it is used."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection

from apps.platform.local_server import free_port
from tests.faults.conftest import PYTHON, needs_postgres, terminate_backends, wait_for

pytestmark = [pytest.mark.faults, needs_postgres, pytest.mark.django_db(transaction=True)]
REQUESTS = 20


def test_requests_after_idle_connections_are_dropped_all_succeed(widget, processes):
    conversation_id, token = widget.conversation()
    port = free_port()
    server = processes("web", [PYTHON, "-m", "tests.faults.serve", str(port)], CONN_MAX_AGE="60")
    url = f"http://127.0.0.1:{port}/api/v1/widget/conversations/{conversation_id}/messages"
    headers = {**widget.headers(token)}

    def get() -> httpx.Response | None:
        try:
            return httpx.get(url, headers=headers, timeout=10)
        except httpx.TransportError:
            return None

    first = wait_for(get, timeout=30, step=0.2)
    assert first is not None, server.output()
    assert first.status_code == 200, first.text  # the server holds a connection now
    assert terminate_backends() >= 1
    connection.close()  # this test's own connection was among them

    responses = [get() for _ in range(REQUESTS)]

    statuses = [r.status_code if r is not None else None for r in responses]
    assert statuses == [200] * REQUESTS, server.output()[-3000:]
    assert all(
        r is not None and r.headers["content-type"].startswith("application/json")
        for r in responses
    )
