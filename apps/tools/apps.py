from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ToolsConfig(AppConfig):
    name = "apps.tools"
    verbose_name = _("Tools")
    label = "tools"

    def ready(self) -> None:
        # Discovers every executor module (apps/tools/executors/), as the steps and the modes
        # are, so the tool admin, the tenant import and `ClientTool.executor_type`'s choices
        # see every executor.
        from apps.tools import executors  # noqa: F401
