from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConsoleConfig(AppConfig):
    """The staff console's pages and their live updates (no models)."""

    name = "apps.console"

    verbose_name = _("Console")
    label = "console"
