"""E-mail channel admin: the client's support addresses (secrets write-only, the inbound webhook
URL to copy, the last poll) and every e-mail in or out as it was — read-only, its HTML shown as
escaped source, never rendered — with its attachments to download (docs/email.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, HttpRequest
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext, pgettext
from django.utils.translation import gettext_lazy as _

from apps.api.admin import (
    ClientSettingsAdmin,
    ReadOnlyAuditAdmin,
    ServiceCheckedForm,
    WriteOnlySecretFormField,
)
from apps.clients.models import Client
from apps.conversations.admin import conversation_column
from apps.mail.channels import (
    CHANNEL_FIELDS,
    channel_inbound_url,
    mail_channel_clean,
    new_inbound_token,
)
from apps.mail.downloads import attachment_response
from apps.mail.models import MailAttachment, MailChannel, MailMessage

PRE = '<pre style="white-space:pre-wrap;max-height:40em;overflow:auto;margin:0">{}</pre>'


class MailChannelForm(ServiceCheckedForm):
    """Secrets are write-only: an empty box keeps the saved one."""

    webhook_secret = WriteOnlySecretFormField(
        label=_("webhook secret"),
        max_length=500,
        help_text=_(
            "The provider's webhook signing key (Mailgun, MailerSend, Mandrill) or the "
            "user:password it posts with (Postmark, SendGrid). Write-only: empty keeps the "
            "saved one."
        ),
    )
    imap_password = WriteOnlySecretFormField(
        label=_("IMAP password"),
        max_length=500,
        help_text=_("Write-only: empty keeps the saved one."),
    )

    class Meta:
        model = MailChannel
        fields = ("client", *CHANNEL_FIELDS)

    def service_clean(
        self, *, client: Client | None, values: dict[str, Any], instance: Any
    ) -> dict[str, Any]:
        """The rules of the API's and the tenant file's (apps/mail/channels.py)."""
        return mail_channel_clean(client=client, values=values, channel=instance)


@admin.register(MailChannel)
class MailChannelAdmin(ClientSettingsAdmin):
    """The client's support addresses (docs/email.md)."""

    form = MailChannelForm
    list_display = [
        "address",
        "client",
        "inbound_via",
        "enabled",
        "secret_state",
        "last_polled_at",
        "last_error",
    ]
    list_filter = ["enabled", "inbound_via", ("client", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["address", "display_name"]
    readonly_fields = ["inbound_url", "secret_state", "last_polled_at", "last_error"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(self.readonly_fields)
        return ["client", *fields] if obj is not None else fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A channel's e-mails belong to conversations: one with mail is disabled, not deleted.
        if (
            obj is not None
            and MailMessage.objects.for_client(obj.client).filter(channel=obj).exists()
        ):
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for channel in queryset:
            if not self.has_delete_permission(request, channel):
                raise PermissionDenied
        super().delete_queryset(request, queryset)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not obj.inbound_token:
            obj.inbound_token = new_inbound_token()
        super().save_model(request, obj, form, change)

    @admin.display(description=_("Inbound webhook URL"))
    def inbound_url(self, obj: MailChannel) -> SafeString | str:
        url = channel_inbound_url(obj) if obj.pk else ""
        if not url:
            return gettext("None: mail is read from the IMAP mailbox.") if obj.pk else "-"
        return format_html(
            '<input type="text" readonly value="{}" size="80" onfocus="this.select()" '
            'aria-label="{}"> <span class="help">{}</span>',
            url,
            gettext("Inbound webhook URL"),
            gettext("Give this URL to the provider as the inbound route of the address."),
        )

    @admin.display(description=_("Secrets"))
    def secret_state(self, obj: MailChannel) -> str:
        def state(value: str) -> str:
            return pgettext("secret state", "set") if value else pgettext("secret state", "not set")

        return gettext("webhook secret: %(webhook)s · IMAP password: %(imap)s") % {
            "webhook": state(obj.webhook_secret),
            "imap": state(obj.imap_password),
        }


class MailAttachmentInline(admin.TabularInline):
    model = MailAttachment
    extra = 0
    can_delete = False
    fields = ("download", "content_type", "size", "refused")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description=_("attachment file name"))
    def download(self, obj: MailAttachment) -> SafeString | str:
        if not obj.file:
            return obj.filename
        url = reverse("admin:mail_mailattachment_download", args=[obj.pk])
        return format_html('<a href="{}" download>{}</a>', url, obj.filename)


MAIL_FIELDS: tuple[str, ...] = (
    "client",
    "channel",
    "conversation_short",
    "direction",
    "disposition",
    "from_display",
    "to_display",
    "subject",
    "created_at",
    "sender_verified",
    "received_via",
    "header_message_id",
    "in_reply_to",
    "references",
    "error",
    "text_block",
    "html_source",
    "headers_block",
)


@admin.register(MailMessage)
class MailMessageAdmin(ReadOnlyAuditAdmin):
    """Every e-mail as it was. Its HTML is shown as escaped source only: a customer's HTML must
    never run in a staff member's session."""

    list_display = [
        "created_at",
        "direction",
        "subject",
        "from_address",
        "client",
        "conversation_short",
        "disposition",
        "sender_verified",
    ]
    list_filter = [
        "direction",
        "disposition",
        "sender_verified",
        ("client", admin.RelatedOnlyFieldListFilter),
    ]
    list_select_related = ["client", "conversation", "channel"]
    search_fields = ["subject", "from_address", "header_message_id"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    fields = MAIL_FIELDS
    readonly_fields = MAIL_FIELDS
    inlines = [MailAttachmentInline]

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "attachment/<int:attachment_id>/",
                self.admin_site.admin_view(self.download_view),
                name="mail_mailattachment_download",
            ),
            *super().get_urls(),
        ]

    def download_view(self, request: HttpRequest, attachment_id: int) -> FileResponse:
        """The file, for staff who may read the e-mail it came with (the same rule as the
        e-mail's page: another client's attachment is a 404)."""
        mails = self.get_queryset(request)
        attachment = get_object_or_404(
            MailAttachment.objects.unscoped("checked below: the mail must be one the user sees"),
            pk=attachment_id,
        )
        if not mails.filter(pk=attachment.mail_id).exists():
            raise PermissionDenied
        if not self.has_view_permission(request, attachment.mail):
            raise PermissionDenied
        return attachment_response(attachment)

    conversation_short = conversation_column()

    @admin.display(description=_("e-mail sender"))
    def from_display(self, obj: MailMessage) -> str:
        return f"{obj.from_name} <{obj.from_address}>" if obj.from_name else obj.from_address

    @admin.display(description=_("e-mail recipients"))
    def to_display(self, obj: MailMessage) -> str:
        return ", ".join(str(a) for a in obj.to_addresses or []) or "-"

    @admin.display(description=_("full text of the e-mail"))
    def text_block(self, obj: MailMessage) -> SafeString | str:
        return format_html(PRE, obj.text) if obj.text else "-"

    @admin.display(description=_("HTML (source, not rendered)"))
    def html_source(self, obj: MailMessage) -> SafeString | str:
        return format_html(PRE, obj.html) if obj.html else "-"

    @admin.display(description=_("e-mail headers"))
    def headers_block(self, obj: MailMessage) -> SafeString | str:
        rows = [(str(h[0]), str(h[1])) for h in obj.headers or [] if len(h) == 2]
        if not rows:
            return "-"
        return format_html(
            '<pre style="white-space:pre-wrap;margin:0">{}</pre>',
            format_html_join("\n", "{}: {}", rows),
        )
