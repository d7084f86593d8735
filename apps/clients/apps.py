from django.apps import AppConfig


class ClientsConfig(AppConfig):
    name = "apps.clients"
    label = "clients"
