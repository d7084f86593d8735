"""Outcomes have no table of their own: they are computed from conversations, messages,
escalations, ratings and usage records (docs/outcomes.md). The one model is the admin's entry."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from apps.clients.models import Client


class ClientOutcomes(Client):
    """The admin's "outcomes by client" entry: a client seen through its outcomes (no table)."""

    class Meta:
        proxy = True
        verbose_name = _("outcomes by client")
        verbose_name_plural = _("outcomes by client")
