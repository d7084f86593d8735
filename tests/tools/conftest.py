from collections.abc import Iterator

import pytest

from apps.tools.executors import webhook as executors
from tests.support.fake_webhook import FakeWebhookServer
from tests.tools.mcp_server import McpTestServer


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "BACKOFF_BASE_SECONDS", 0.0)


@pytest.fixture
def hook() -> Iterator[FakeWebhookServer]:
    with FakeWebhookServer() as server:
        yield server


@pytest.fixture
def mcp_server() -> Iterator[McpTestServer]:
    """A real MCP server (streamable HTTP) on 127.0.0.1, fresh for each test."""
    with McpTestServer() as server:
        yield server
