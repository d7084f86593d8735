from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    # One admin section for staff and access. (django-allauth's own app is also called
    # "Accounts"; its only admin page, e-mail addresses, is an inline on the user instead —
    # see admin.py.)
    verbose_name = _("Staff accounts and API keys")
