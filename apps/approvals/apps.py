from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ApprovalsConfig(AppConfig):
    name = "apps.approvals"
    verbose_name = _("Approvals")

    def ready(self) -> None:
        # Imported for what importing does: the tasks register under their names in every
        # process, for the services queue the approved run by name and never import the task
        # module (tasks.py imports the services).
        from apps.approvals import tasks  # noqa: F401
