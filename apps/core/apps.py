from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"

    def ready(self) -> None:
        from apps.core import checks  # noqa: F401  (registers the deployment checks)

        # django.contrib.admin (first in INSTALLED_APPS) has loaded every admin module by now.
        from django.contrib import admin

        from apps.core.admin import lock_platform_admins

        lock_platform_admins(admin.site)
