from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ClientsConfig(AppConfig):
    name = "apps.clients"
    verbose_name = _("Clients")
    label = "clients"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from apps.clients import rowcache
        from apps.clients.models import Client, Plan

        for model in (Client, Plan):  # a process always reads its own changes (rowcache.py)
            post_save.connect(rowcache.forget_all, sender=model, dispatch_uid=f"rowcache-{model}")
            post_delete.connect(
                rowcache.forget_all, sender=model, dispatch_uid=f"rowcache-del-{model}"
            )
