from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PlaygroundConfig(AppConfig):
    name = "apps.playground"
    label = "playground"
    verbose_name = _("Reasoning playground")
