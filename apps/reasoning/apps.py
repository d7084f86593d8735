from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReasoningConfig(AppConfig):
    name = "apps.reasoning"
    verbose_name = _("Reasoning")
    label = "reasoning"

    def ready(self) -> None:
        # Registers every mode module (apps/reasoning/modes/) in the mode registry that plans,
        # the admin and the tenant import read (apps.clients.modes).
        from apps.reasoning import modes  # noqa: F401
