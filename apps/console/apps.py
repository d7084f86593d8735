from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The staff console's pages and their live updates (no models)."""

    name = "apps.console"
    label = "console"
