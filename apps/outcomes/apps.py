from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OutcomesConfig(AppConfig):
    name = "apps.outcomes"
    label = "outcomes"
    verbose_name = _("Outcomes")
