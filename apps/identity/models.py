"""The e-mail one-time code (docs/widget.md "E-mail one-time code"): what a business configures
(`EmailCodeSetting`: which read tool finds the customer's address on file) and each code sent
(`EmailCodeChallenge`: only an HMAC of the code is stored, never the code)."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import conversation_fk, status_field
from apps.core.models import PublicTenantModel, TenantOwnedModel

# A result field as a dotted path: `customer_email`, `customer.email`, `items.0.email`.
FIELD_PATH = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")


def validate_field_path(value: str) -> None:
    if not FIELD_PATH.match(value or ""):
        raise ValidationError(
            gettext(
                "%(value)s is not a result field path (names separated by dots, e.g. "
                "customer.email)."
            )
            % {"value": repr(value)}
        )


class EmailCodeSetting(TenantOwnedModel):
    """One per client: the read tool whose result holds the customer's address on file."""

    tool_name = models.CharField(
        _("lookup tool"),
        max_length=64,
        help_text=_(
            "The name of one of this client's read tools, run with the details the customer "
            "gives (e.g. order_status with the order number)."
        ),
    )
    email_field = models.CharField(
        _("e-mail field"),
        max_length=200,
        validators=[validate_field_path],
        help_text=_(
            "Where the tool's result holds the address on file, as a dotted path "
            "(e.g. customer.email). The code goes only to that address."
        ),
    )
    id_field = models.CharField(
        _("customer id field"),
        max_length=200,
        blank=True,
        validators=[validate_field_path],
        help_text=_(
            "Where the result holds the customer's id (dotted path). Empty: the verified "
            "customer's id is the address."
        ),
    )
    enabled = models.BooleanField(_("enabled"), default=True)

    class Meta:
        verbose_name = _("e-mail code setting")
        verbose_name_plural = _("e-mail code settings")
        constraints = [
            models.UniqueConstraint(fields=["client"], name="identity_one_email_code_setting")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} → {self.email_field}"


class ChallengeStatus(models.TextChoices):
    OPEN = "open", _("Waiting for the code")
    VERIFIED = "verified", _("Verified")
    EXHAUSTED = "exhausted", _("Too many wrong codes")
    EXPIRED = "expired", _("Expired")
    REPLACED = "replaced", _("Replaced by a newer code")
    UNSENT = "unsent", _("The e-mail could not be sent")


class EmailCodeChallenge(PublicTenantModel):
    """One code sent to an address on file. `code_hash` is an HMAC (SECRET_KEY) of the code with
    this row's `public_id`: the code itself is never stored."""

    conversation = conversation_fk(related_name="+")
    # Copied from the conversation: the per-visitor limit counts across their conversations.
    visitor_id = models.CharField(max_length=128, blank=True, verbose_name=_("visitor id"))
    email = models.EmailField(_("sent to"))
    customer_ref = models.CharField(_("customer id from the tool"), max_length=255, blank=True)
    tool_name = models.CharField(_("lookup tool"), max_length=64)
    code_hash = models.CharField(max_length=64, editable=False, verbose_name=_("code hash"))
    status = status_field(ChallengeStatus.OPEN, max_length=16)
    attempts = models.PositiveSmallIntegerField(_("wrong codes"), default=0)
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    verified_at = models.DateTimeField(null=True, blank=True, verbose_name=_("verified at"))

    class Meta:
        verbose_name = _("e-mail code")
        verbose_name_plural = _("e-mail codes")
        indexes = [
            models.Index(fields=["client", "conversation", "status"]),
            models.Index(fields=["client", "email", "created_at"]),
            models.Index(fields=["client", "visitor_id", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"e-mail code {self.public_id}"
