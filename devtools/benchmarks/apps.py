from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BenchmarksConfig(AppConfig):
    """The benchmark harness (`manage.py bench_modes`): the top layer, it drives the whole
    pipeline and may import every app; no app imports it."""

    name = "devtools.benchmarks"

    verbose_name = _("Benchmarks")
    label = "benchmarks"
