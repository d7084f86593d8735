"""A worker logs failures and retries, not a line per received and per succeeded task
(config/settings/parts/core.py LOGGING, config/celery.py; docs/deployment.md)."""

import logging
from types import SimpleNamespace

import pytest
from celery import signals
from celery.exceptions import Retry

from apps.core.tasks import ping

QUIET = ("celery.worker.strategy", "celery.app.trace")


def test_the_per_task_lines_are_off_and_failures_still_log():
    for name in QUIET:
        logger = logging.getLogger(name)
        assert not logger.isEnabledFor(logging.INFO)
        assert logger.isEnabledFor(logging.WARNING)  # rejections; failures log at ERROR


def _send_retry() -> None:
    signals.task_retry.send(
        sender=ping, request=SimpleNamespace(id="t-1"), reason=Retry("db down"), einfo=None
    )


def test_a_retry_is_still_logged(caplog):
    with caplog.at_level(logging.INFO, logger="config.celery"):
        _send_retry()
    [record] = [r for r in caplog.records if r.name == "config.celery"]
    assert record.levelno == logging.INFO
    assert record.getMessage() == "Task core.ping[t-1] retry: db down"


@pytest.fixture
def trace_at_info():
    trace = logging.getLogger("celery.app.trace")
    level = trace.level
    trace.setLevel(logging.INFO)
    yield
    trace.setLevel(level)


def test_with_the_per_task_lines_on_celery_logs_the_retry_itself(caplog, trace_at_info):
    with caplog.at_level(logging.INFO, logger="config.celery"):
        _send_retry()
    assert not [r for r in caplog.records if r.name == "config.celery"]
