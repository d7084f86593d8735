from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class KnowledgeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.knowledge"
    verbose_name = _("Knowledge")

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        # Registers every source kind module (apps/knowledge/sources/): the model's choices,
        # the admin, the API and the tenant import read the registry.
        from apps.knowledge import cache, sources  # noqa: F401
        from apps.knowledge.models import Article, KnowledgeSource

        # A saved or deleted article or source changes the client's knowledge topics.
        for model in (Article, KnowledgeSource):
            uid = model.__name__
            post_save.connect(cache.on_change, sender=model, dispatch_uid=f"topics-{uid}")
            post_delete.connect(cache.on_change, sender=model, dispatch_uid=f"topics-del-{uid}")
