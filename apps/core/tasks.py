from celery import shared_task


@shared_task(name="core.ping", ignore_result=True)
def ping() -> None:
    """Does nothing, on purpose: what a worker spends on it is Celery's own cost per task
    (benchmarks/celery_overhead.py measures that). Harmless to send by hand to check that a
    worker consumes: `celery -A config call core.ping`."""
