from django.apps import AppConfig


class PlatformConfig(AppConfig):
    """How the process runs and talks to the world: the ASGI handler and uvicorn worker, the
    database pool and backend, server-sent events, the fleet's turn slots, throttling, request
    parsing and the outbound HTTP client with its SSRF guard. Imports the kernel, no app."""

    name = "apps.platform"
    label = "platform"
