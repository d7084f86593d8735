from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CoreConfig(AppConfig):
    name = "apps.core"
    verbose_name = _("Core")
    label = "core"

    def ready(self) -> None:
        from django.contrib import admin

        from apps.core import checks  # noqa: F401  (registers the deployment checks)
        from apps.core.admin import lock_platform_admins

        # django.contrib.admin (first in INSTALLED_APPS) has loaded every admin module by now.
        lock_platform_admins(admin.site)
