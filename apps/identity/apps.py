from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "apps.identity"
    verbose_name = "Customer identity"
