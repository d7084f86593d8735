"""A flag on one of the assistant's answers. The table is the one the escalations app created
(`escalations_messageflag`): the model moved here, its rows did not."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, optional_fk
from apps.core.models import PublicTenantModel


class FlagReason(models.TextChoices):
    WRONG = "wrong", _("Wrong")
    UNHELPFUL = "unhelpful", _("Unhelpful")
    UNSAFE = "unsafe", _("Unsafe")


class MessageFlag(PublicTenantModel):
    """Staff marked one of the assistant's visible replies as wrong, unhelpful or unsafe,
    optionally with what it should have said. The correction reaches no prompt by itself: it
    becomes a proposal staff approve (apps/insights/teach.py)."""

    conversation = conversation_fk(related_name="flags")
    message = models.ForeignKey(
        "conversations.Message",
        on_delete=models.CASCADE,
        related_name="flags",
        verbose_name=_("message"),
    )
    reason = models.CharField(_("reason"), max_length=10, choices=FlagReason.choices)
    correction = models.TextField(
        _("correction"), blank=True, max_length=2000, help_text=_("What it should have said.")
    )
    flagged_by = optional_fk("accounts.User", _("flagged by"))

    class Meta:
        verbose_name = _("flagged answer")
        verbose_name_plural = _("flagged answers")
        db_table = "escalations_messageflag"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["client", "conversation"])]

    def __str__(self) -> str:
        return f"{self.get_reason_display()}: #{self.message_id}"
