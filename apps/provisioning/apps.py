from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ProvisioningConfig(AppConfig):
    """Tenants from a file: the tenant import (`import_client`, `demo_setup`) and the demo reset.
    It writes into clients, accounts, billing and tools, so it sits above them (no models)."""

    name = "apps.provisioning"

    verbose_name = _("Provisioning")
    label = "provisioning"
