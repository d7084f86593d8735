from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    """The benchmark harness (`manage.py bench_modes`): the top layer, it drives the whole
    pipeline and may import every app; no app imports it."""

    name = "apps.benchmarks"
    label = "benchmarks"
