from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class EventsConfig(AppConfig):
    name = "apps.events"
    verbose_name = _("Events out")

    def ready(self) -> None:
        # The apps that cause events call `apps.core.outbound.emit` (they sit below this app and
        # never import it); this app receives them. Importing the tasks registers their names
        # in every process: the services queue them by name and never import the task module.
        from apps.core import outbound
        from apps.events import tasks  # noqa: F401
        from apps.events.services import event_receive

        outbound.connect(event_receive)
