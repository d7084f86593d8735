from django.apps import AppConfig


class ReasoningConfig(AppConfig):
    name = "apps.reasoning"
    label = "reasoning"
