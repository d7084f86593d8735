from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class InsightsConfig(AppConfig):
    name = "apps.insights"
    label = "insights"
    verbose_name = _("Insights")
