from django.apps import AppConfig


class EscalationsConfig(AppConfig):
    name = "apps.escalations"
    label = "escalations"
