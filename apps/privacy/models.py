"""The record of what was done with customers' data (docs/privacy.md).

`DataSubjectRequest` is the register a business shows a supervisory authority: who asked for an
export or an erasure, when, how the customer was identified and what went — counts per kind of
row, never content. Not even the address asked about is kept: only a keyed digest of it
(`match_digest`), so a second request for the same customer can be matched with the first
without the register itself holding their e-mail address. Retention runs are recorded the same
way (kind `retention`).

`ErasedConversation` marks a conversation whose customer data is gone (by request or by the
retention task), so retention never erases the same conversation twice and the admin can say
what happened to an empty conversation.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, optional_fk
from apps.core.models import PublicTenantModel, TenantOwnedModel


class RequestKind(models.TextChoices):
    EXPORT = "export", _("Export")
    ERASE = "erase", _("Erasure")
    RETENTION = "retention", _("Retention (scheduled erasure)")


class MatchKind(models.TextChoices):
    EMAIL = "email", _("Customer's e-mail address")
    CONVERSATION = "conversation", _("Conversation id")
    VISITOR = "visitor", _("Visitor id")
    CUSTOMER = "customer", _("Verified customer id")
    AGE = "age", _("Conversation age (retention)")


class RequestChannel(models.TextChoices):
    ADMIN = "admin", _("Admin")
    API = "api", _("REST API")
    COMMAND = "command", _("manage.py")
    SCHEDULE = "schedule", _("Daily retention task")


class DataSubjectRequest(PublicTenantModel):
    kind = models.CharField(_("kind"), max_length=10, choices=RequestKind.choices)
    match_kind = models.CharField(_("found by"), max_length=12, choices=MatchKind.choices)
    match_digest = models.CharField(
        _("match digest"),
        max_length=64,
        blank=True,
        help_text=_(
            "A keyed digest of what the customer was found by (never the address or id itself): "
            "the same customer gives the same digest."
        ),
    )
    channel = models.CharField(_("through"), max_length=10, choices=RequestChannel.choices)
    requested_by = optional_fk(settings.AUTH_USER_MODEL, _("requested by"))
    # Who asked when no staff user did: the API key's name and prefix, "manage.py", the task.
    requested_by_label = models.CharField(_("requester"), max_length=200, blank=True)
    conversations = models.PositiveIntegerField(_("conversations"), default=0)
    counts = models.JSONField(
        _("rows"),
        default=dict,
        blank=True,
        help_text=_("How many rows of each kind were exported or erased."),
    )
    unconfirmed_left_out = models.PositiveIntegerField(
        _("unconfirmed matches left out"),
        default=0,
        help_text=_(
            "Conversations with the e-mail address that the customer never confirmed, left out "
            "of this request (staff did not include them)."
        ),
    )
    not_erased = models.JSONField(
        _("not erased"),
        default=list,
        blank=True,
        help_text=_("What the erasure could not remove, where, and why."),
    )
    keep_until = models.DateField(
        _("kept until"),
        help_text=_("The record itself is deleted after this day (PRIVACY_RECORD_KEEP_DAYS)."),
    )

    class Meta:
        verbose_name = _("privacy request")
        verbose_name_plural = _("privacy requests")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["client", "-created_at"]),
            models.Index(fields=["client", "match_digest"]),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.created_at:%Y-%m-%d %H:%M}"


class ErasedConversation(TenantOwnedModel):
    conversation = conversation_fk(related_name="erasure", one_to_one=True)
    request = optional_fk(DataSubjectRequest, _("request"))

    class Meta:
        verbose_name_plural = _("erased conversations")
        verbose_name = _("erased conversation")

    def __str__(self) -> str:
        return f"erased {self.conversation_id}"
