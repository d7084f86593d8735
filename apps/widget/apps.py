from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WidgetConfig(AppConfig):
    """The customer widget's surfaces: its API, the chat frame page and their reads (no models)."""

    name = "apps.widget"

    verbose_name = _("Widget")
    label = "widget"

    def ready(self) -> None:
        # Connects the CORS receiver for the widget API before the first request (a preflight
        # may be the very first request a server answers).
        from apps.widget import auth  # noqa: F401
