from collections.abc import Iterator

import pytest

from apps.tools.executors import webhook as executors
from tests.support.fake_webhook import FakeWebhookServer


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "BACKOFF_BASE_SECONDS", 0.0)


@pytest.fixture
def hook() -> Iterator[FakeWebhookServer]:
    with FakeWebhookServer() as server:
        yield server
