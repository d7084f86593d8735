"""`core.ping`: the no-op task that devtools/benchmarks/celery_overhead.py sends (and an operator
may send by hand to check a worker consumes). Its name is what both use, so it must not drift."""

from apps.core.tasks import ping
from config.celery import app


def test_ping_is_registered_under_its_stable_name_and_does_nothing():
    registered = app.tasks["core.ping"]
    assert registered.run is ping.run
    assert registered.ignore_result
    assert ping.apply().get() is None  # runs here, returns nothing
