from django.apps import AppConfig


class InsightsConfig(AppConfig):
    name = "apps.insights"
    label = "insights"
    verbose_name = "Insights"
