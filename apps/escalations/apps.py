from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class EscalationsConfig(AppConfig):
    name = "apps.escalations"
    verbose_name = _("Escalations")
    label = "escalations"
