from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "apps.conversations"
    label = "conversations"

    def ready(self) -> None:
        # Connects the CORS receiver for the widget API before the first request (a preflight
        # may be the very first request a server answers).
        from apps.conversations import widget_auth  # noqa: F401
