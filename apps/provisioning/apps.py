from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    """Tenants from a file: the tenant import (`import_client`, `demo_setup`) and the demo reset.
    It writes into clients, accounts, billing and tools, so it sits above them (no models)."""

    name = "apps.provisioning"
    label = "provisioning"
