from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MailConfig(AppConfig):
    name = "apps.mail"
    label = "mail"
    verbose_name = _("E-mail channel")
