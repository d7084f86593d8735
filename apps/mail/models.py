"""E-mail as a channel (docs/email.md): the client's support addresses, every e-mail that came in
or went out, and the attachments kept for staff.

A conversation whose `channel` is "email" is one e-mail thread: inbound mail joins it through
`In-Reply-To`/`References` matched against the `header_message_id`s stored here, never through the
subject."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk
from apps.core.models import PublicTenantModel, TenantOwnedModel


class InboundVia(models.TextChoices):
    """How mail for the address reaches GuideDesk: a provider's signed inbound webhook
    (normalised by django-anymail) or IMAP polling of a plain mailbox."""

    MAILGUN = "mailgun", "Mailgun"
    POSTMARK = "postmark", "Postmark"
    MAILERSEND = "mailersend", "MailerSend"
    MANDRILL = "mandrill", "Mandrill"
    SENDGRID = "sendgrid", "SendGrid"
    IMAP = "imap", _("IMAP mailbox")


class MailChannel(PublicTenantModel):
    """One support address of the client's (support@shop.example) and how its mail comes in."""

    address = models.EmailField(
        _("support address"),
        help_text=_("The address customers write to; replies go out from it."),
    )
    display_name = models.CharField(_("sender name"), max_length=100, blank=True)
    inbound_via = models.CharField(_("inbound mail via"), max_length=12, choices=InboundVia.choices)
    # The path token of this channel's inbound webhook URL (/mail/inbound/<token>/): random,
    # never derived from the client.
    inbound_token = models.CharField(
        _("inbound URL token"), max_length=64, unique=True, editable=False
    )
    # The provider's signing key (Mailgun's webhook signing key, MailerSend's or Mandrill's
    # webhook secret) or the basic-auth "user:password" the provider posts with. Write-only.
    webhook_secret = models.CharField(
        _("webhook secret"), max_length=500, blank=True, help_text=_("Write-only.")
    )
    imap_host = models.CharField(_("IMAP host"), max_length=255, blank=True)
    imap_port = models.PositiveIntegerField(_("IMAP port"), default=993)
    imap_ssl = models.BooleanField(_("IMAP over TLS"), default=True)
    imap_username = models.CharField(_("IMAP user"), max_length=255, blank=True)
    imap_password = models.CharField(
        _("IMAP password"), max_length=500, blank=True, help_text=_("Write-only.")
    )
    imap_folder = models.CharField(_("IMAP folder"), max_length=255, default="INBOX")
    # The highest UID read from the folder, with the folder's UIDVALIDITY it belongs to.
    imap_last_uid = models.PositiveBigIntegerField(default=0, editable=False)
    imap_uidvalidity = models.PositiveBigIntegerField(default=0, editable=False)
    # For IMAP: the authserv-id of the receiving mail server whose Authentication-Results
    # header is trusted for DKIM/SPF (RFC 8601); empty trusts none, so no sender is verified.
    trusted_authserv_id = models.CharField(
        _("trusted Authentication-Results server"), max_length=255, blank=True
    )
    max_replies_per_thread_hour = models.PositiveSmallIntegerField(
        _("replies per thread per hour"), default=5
    )
    max_replies_per_sender_hour = models.PositiveSmallIntegerField(
        _("replies per sender per hour"), default=10
    )
    max_attachment_bytes = models.PositiveIntegerField(
        _("largest attachment (bytes)"), default=10 * 1024 * 1024
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    last_polled_at = models.DateTimeField(_("last polled at"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)

    class Meta:
        verbose_name = _("e-mail channel")
        verbose_name_plural = _("e-mail channels")
        ordering = ["client", "address"]
        constraints = [
            models.UniqueConstraint(fields=["client", "address"], name="uniq_mail_channel_address")
        ]

    def __str__(self) -> str:
        return self.address


class Direction(models.TextChoices):
    INBOUND = "in", _("Received")
    OUTBOUND = "out", _("Sent")


class Disposition(models.TextChoices):
    """What became of an e-mail. Inbound: answered by the turn pipeline, or kept and never
    answered (loops, bounces, lists, caps). Outbound: sent, or failed."""

    ACCEPTED = "accepted", _("Accepted — joined its conversation")
    AUTO_REPLY = "auto_reply", _("Auto-reply — not answered")
    BOUNCE = "bounce", _("Bounce — not answered")
    MAILING_LIST = "list", _("Mailing list — not answered")
    OWN_MAIL = "own", _("Our own mail looped back — not answered")
    THREAD_CAPPED = "thread_cap", _("Thread over its hourly cap — kept for staff")
    SENDER_CAPPED = "sender_cap", _("Sender over the hourly cap — kept for staff")
    DUPLICATE = "duplicate", _("Duplicate — already received")
    EMPTY = "empty", _("No new text — not answered")
    QUEUED = "queued", _("Queued — being sent")
    SENT = "sent", _("Sent")
    SEND_FAILED = "send_failed", _("Sending failed")


class MailMessage(PublicTenantModel):
    """One e-mail, in or out, as it was: its headers, its full text and what became of it.
    `message` is the conversation message it became (the customer's stripped text) or the
    message it carried out (an assistant or staff reply)."""

    channel = models.ForeignKey(
        MailChannel, on_delete=models.CASCADE, related_name="mails", verbose_name=_("channel")
    )
    conversation = optional_fk(
        "conversations.Conversation",
        _("conversation"),
        on_delete=models.CASCADE,
        related_name="mails",
    )
    message = optional_fk("conversations.Message", _("message"), related_name="mails")
    direction = models.CharField(_("direction"), max_length=3, choices=Direction.choices)
    disposition = models.CharField(
        _("what became of it"), max_length=12, choices=Disposition.choices
    )
    # The RFC 5322 Message-ID, without angle brackets; ours for outbound mail.
    header_message_id = models.CharField(_("Message-ID"), max_length=998)
    in_reply_to = models.CharField(_("In-Reply-To"), max_length=998, blank=True)
    references = models.TextField(_("References"), blank=True)
    from_address = models.EmailField(_("from"), max_length=320)
    from_name = models.CharField(_("from name"), max_length=200, blank=True)
    to_addresses = models.JSONField(_("to"), default=list, blank=True)
    subject = models.CharField(_("subject"), max_length=998, blank=True)
    headers = models.JSONField(_("headers"), default=list, blank=True)  # [[name, value], …]
    text = models.TextField(_("full text"), blank=True)
    html = models.TextField(_("HTML"), blank=True)
    # The sender's address passed DKIM or SPF as reported by the inbound provider (or the
    # trusted Authentication-Results header): only then is it a verified identity.
    sender_verified = models.BooleanField(_("sender verified"), default=False)
    received_via = models.CharField(_("via"), max_length=12, choices=InboundVia.choices, blank=True)
    error = models.CharField(_("error"), max_length=500, blank=True)
    # Outbound only: how often sending was tried, and when the next try is due (None: nothing
    # left to try — sent, or given up after the last attempt).
    send_attempts = models.PositiveSmallIntegerField(_("send attempts"), default=0, editable=False)
    next_attempt_at = models.DateTimeField(
        _("next attempt at"), null=True, blank=True, editable=False
    )

    class Meta:
        verbose_name = _("e-mail")
        verbose_name_plural = _("e-mails")
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["client", "header_message_id"], name="mail_client_msgid_idx"),
            models.Index(fields=["client", "conversation", "created_at"]),
            models.Index(fields=["client", "from_address", "direction", "created_at"]),
            # The beat's retries: outbound mail whose next attempt is due (a short list).
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(next_attempt_at__isnull=False),
                name="mail_next_attempt_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_direction_display()}: {self.subject[:60]}"


class MailAttachment(TenantOwnedModel):
    """A file that came with an inbound e-mail: stored for staff (within the channel's size and
    type limits), listed in the inbox, never given to the model."""

    mail = models.ForeignKey(
        MailMessage, on_delete=models.CASCADE, related_name="attachments", verbose_name=_("e-mail")
    )
    filename = models.CharField(_("file name"), max_length=255)
    content_type = models.CharField(_("type"), max_length=255)
    size = models.PositiveBigIntegerField(_("size (bytes)"))
    file = models.FileField(_("file"), upload_to="mail/%Y/%m/", blank=True)
    # Why the file was not kept (too large, a type that is not accepted); empty when kept.
    refused = models.CharField(_("not kept because"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("attachment")
        verbose_name_plural = _("attachments")
        ordering = ["id"]

    def __str__(self) -> str:
        return self.filename
