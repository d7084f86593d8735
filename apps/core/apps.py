from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CoreConfig(AppConfig):
    name = "apps.core"
    verbose_name = _("Core")
    label = "core"

    def ready(self) -> None:
        from django.apps import apps

        from apps.core import checks  # noqa: F401  (registers the deployment checks)
        from apps.core.tenancy import register_parent_lookups

        # Every model is loaded by now: a bare parent id stops counting as a tenant scope.
        register_parent_lookups(apps.get_models())
