"""Outcomes are computed from conversations, messages, escalations, ratings and usage records
(docs/outcomes.md). Two models: the admin's entry, and the one judgement of each ended
conversation that the `conversation.resolved` event is sent from (docs/events.md)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.clients.models import Client
from apps.core.model_bases import conversation_fk
from apps.core.models import TenantOwnedModel


class ClientOutcomes(Client):
    """The admin's "outcomes by client" entry: a client seen through its outcomes (no table)."""

    class Meta:
        proxy = True
        verbose_name = _("outcomes by client")
        verbose_name_plural = _("outcomes by client")


class ConversationResolution(TenantOwnedModel):
    """A conversation judged once it ended, by the outcomes page's rule: resolved by the
    assistant or not. Written by the beat task, once per conversation; a resolved one sends
    `conversation.resolved`. The outcomes figures stay computed on the fly (a rating that comes
    later can change those, never this record)."""

    conversation = conversation_fk(related_name="resolution", one_to_one=True)
    resolved = models.BooleanField(_("resolved by the assistant"))
    # The assistant's last answer (resolved) or when it was judged (not resolved).
    resolved_at = models.DateTimeField(_("resolved at"), null=True, blank=True)

    class Meta:
        verbose_name = _("conversation resolution")
        verbose_name_plural = _("conversation resolutions")
        indexes = [models.Index(fields=["client", "resolved", "created_at"])]

    def __str__(self) -> str:
        return f"{self.conversation_id}: {'resolved' if self.resolved else 'not resolved'}"
