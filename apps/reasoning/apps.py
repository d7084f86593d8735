from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReasoningConfig(AppConfig):
    name = "apps.reasoning"
    verbose_name = _("Reasoning")
    label = "reasoning"

    def ready(self) -> None:
        # Imported for what importing does: every mode module (apps/reasoning/modes/) registers
        # in the mode registry that plans, the admin and the tenant import read
        # (apps.clients.modes); the Celery tasks register under their names in every process,
        # for the pipeline queues them by name (apps/reasoning/dispatch.py) and never imports
        # the task module.
        from apps.reasoning import modes, tasks  # noqa: F401
