from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The request surface every app's API, admin and views stand on: the one resolver, the
    permission rule, the API base class, the schema helpers and the admin base. It sits above
    accounts and clients (it reads memberships and clients), so the kernel (apps.core) stays
    free of apps."""

    name = "apps.api"
    label = "api"

    def ready(self) -> None:
        from django.contrib import admin

        from apps.api.admin import lock_platform_admins

        # django.contrib.admin (first in INSTALLED_APPS) has loaded every admin module by now.
        lock_platform_admins(admin.site)
