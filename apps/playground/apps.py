from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "apps.playground"
    label = "playground"
    verbose_name = "Reasoning playground"
