from django.apps import AppConfig


class ReasoningConfig(AppConfig):
    name = "apps.reasoning"
    label = "reasoning"

    def ready(self) -> None:
        # Registers every mode module (apps/reasoning/modes/) in the mode registry that plans,
        # the admin and the tenant import read (apps.clients.modes).
        from apps.reasoning import modes  # noqa: F401
