"""Staff / back-office API of the e-mail channel: the client's support addresses
(`/api/v1/mail-channels/`, secrets write-only, the inbound webhook URL in the body) and the
e-mails of one conversation as they were (`/api/v1/conversations/<id>/emails/`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, READ, StaffAPIView
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    conflict_response,
    error_responses,
    found_or_404,
    parse_uuid,
)
from apps.api.serializers import (
    RefusesUnknownFields,
    SecretIsSetField,
    WriteOnlySecretField,
    validated_body,
)
from apps.conversations.selectors import conversation_get
from apps.mail.channels import (
    channel_inbound_url,
    mail_channel_create,
    mail_channel_delete,
    mail_channel_update,
)
from apps.mail.models import Direction, Disposition, InboundVia, MailChannel
from apps.mail.thread import mail_channel_list, mail_thread

TAG = "e-mail channels"

# ---------------------------------------------------------------------------------------------
# Serializers
# ---------------------------------------------------------------------------------------------


class MailChannelSerializer(serializers.Serializer):
    """What is read back: never the webhook secret nor the IMAP password."""

    id = serializers.UUIDField(source="public_id", help_text="The channel's public id.")
    address = serializers.EmailField(help_text="The support address customers write to.")
    display_name = serializers.CharField(help_text="The sender name of replies.")
    inbound_via = NamedChoiceField(choices=InboundVia, enum_name="MailInboundVia")
    inbound_url = serializers.SerializerMethodField(
        help_text="Give this URL to the provider as the inbound webhook; empty for IMAP."
    )
    has_webhook_secret = SecretIsSetField(source="webhook_secret")
    imap_host = serializers.CharField()
    imap_port = serializers.IntegerField()
    imap_ssl = serializers.BooleanField()
    imap_username = serializers.CharField()
    has_imap_password = SecretIsSetField(source="imap_password")
    imap_folder = serializers.CharField()
    trusted_authserv_id = serializers.CharField(
        help_text="IMAP: the receiving server whose Authentication-Results header is trusted "
        "for DKIM/SPF; empty trusts none (no sender is verified)."
    )
    max_replies_per_thread_hour = serializers.IntegerField()
    max_replies_per_sender_hour = serializers.IntegerField()
    max_attachment_bytes = serializers.IntegerField()
    enabled = serializers.BooleanField()
    last_polled_at = serializers.DateTimeField(allow_null=True, help_text="IMAP: last read.")
    last_error = serializers.CharField(help_text="Why the last poll failed; empty if it did not.")

    def get_inbound_url(self, channel: MailChannel) -> str:
        return channel_inbound_url(channel)


class MailChannelWriteSerializer(RefusesUnknownFields):
    """The settings a request may give; the rules are `mail_channel_clean`'s (shared with the
    admin and the tenant file). Any other key is refused by name."""

    address = serializers.EmailField(max_length=254)
    display_name = serializers.CharField(max_length=100, required=False, allow_blank=True)
    inbound_via = NamedChoiceField(choices=InboundVia, enum_name="MailInboundVia")
    webhook_secret = WriteOnlySecretField()
    imap_host = serializers.CharField(max_length=255, required=False, allow_blank=True)
    imap_port = serializers.IntegerField(required=False, min_value=1, max_value=65535)
    imap_ssl = serializers.BooleanField(required=False)
    imap_username = serializers.CharField(max_length=255, required=False, allow_blank=True)
    imap_password = WriteOnlySecretField()
    imap_folder = serializers.CharField(max_length=255, required=False, allow_blank=True)
    trusted_authserv_id = serializers.CharField(max_length=255, required=False, allow_blank=True)
    max_replies_per_thread_hour = serializers.IntegerField(
        required=False, min_value=0, max_value=100
    )
    max_replies_per_sender_hour = serializers.IntegerField(
        required=False, min_value=0, max_value=100
    )
    max_attachment_bytes = serializers.IntegerField(
        required=False, min_value=0, max_value=25 * 1024 * 1024
    )
    enabled = serializers.BooleanField(required=False)


class MailAttachmentSerializer(serializers.Serializer):
    filename = serializers.CharField()
    content_type = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes.")
    kept = serializers.SerializerMethodField(help_text="Whether the file was stored.")
    refused = serializers.CharField(help_text="Why it was not kept; empty when it was.")

    def get_kept(self, attachment: Any) -> bool:
        return bool(attachment.file)


class MailMessageSerializer(serializers.Serializer):
    """One e-mail as it was. The text is the full text as received or sent (quoted history
    included); the HTML part is not returned."""

    id = serializers.UUIDField(source="public_id")
    direction = NamedChoiceField(choices=Direction, enum_name="MailDirection")
    disposition = NamedChoiceField(choices=Disposition, enum_name="MailDisposition")
    message_id = serializers.CharField(source="header_message_id")
    in_reply_to = serializers.CharField()
    from_address = serializers.CharField()
    from_name = serializers.CharField()
    to = serializers.ListField(child=serializers.CharField(), source="to_addresses")
    subject = serializers.CharField()
    text = serializers.CharField()
    sender_verified = serializers.BooleanField(
        help_text="The provider reported DKIM or SPF passing for the sender's address."
    )
    message_seq = serializers.IntegerField(
        source="message.seq",
        allow_null=True,
        help_text="`seq` of the conversation message it became or carried; null when none.",
    )
    attachments = MailAttachmentSerializer(many=True)
    created_at = serializers.DateTimeField()


CHANNEL_EXAMPLE: dict[str, Any] = {
    "id": "4b6f0f8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
    "address": "support@shop.example",
    "display_name": "Shop support",
    "inbound_via": "mailgun",
    "inbound_url": "https://guidedesk.example/mail/inbound/3q2-7w…/",
    "has_webhook_secret": True,
    "imap_host": "",
    "imap_port": 993,
    "imap_ssl": True,
    "imap_username": "",
    "has_imap_password": False,
    "imap_folder": "INBOX",
    "trusted_authserv_id": "",
    "max_replies_per_thread_hour": 5,
    "max_replies_per_sender_hour": 10,
    "max_attachment_bytes": 10485760,
    "enabled": True,
    "last_polled_at": None,
    "last_error": "",
}
MAIL_EXAMPLE: dict[str, Any] = {
    "id": "0f1e2d3c-4b5a-4968-8776-655443322110",
    "direction": "in",
    "disposition": "accepted",
    "message_id": "CAF-1@mail.example.com",
    "in_reply_to": "",
    "from_address": "jane@example.com",
    "from_name": "Jane Roe",
    "to": ["support@shop.example"],
    "subject": "Cancel my order",
    "text": "Please cancel order TH-10042.\n\n-- \nJane",
    "sender_verified": True,
    "message_seq": 1,
    "attachments": [
        {
            "filename": "receipt.pdf",
            "content_type": "application/pdf",
            "size": 48213,
            "kept": True,
            "refused": "",
        }
    ],
    "created_at": "2026-03-02T09:15:30.000000Z",
}
CHANNEL_ID = OpenApiParameter(
    "channel_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The channel's id."
)
CONVERSATION_ID = OpenApiParameter(
    "public_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The conversation's id."
)
# A write's 400 example: the field it names and its message.
INVALID_WRITE = ("webhook_secret", "Needed to check that inbound mail really …")


CHANNEL_IN_USE = conflict_response(
    "The channel has e-mails, which belong to conversations and are kept: disable it instead.",
    (
        "In use",
        "in_use",
        "This channel's e-mails belong to conversations and are kept: disable the channel instead.",
    ),
)


def _channel_or_404(view: StaffAPIView, channel_id: str) -> MailChannel:
    parsed = parse_uuid(channel_id)
    channels = mail_channel_list(client=view.client)
    return found_or_404(channels.filter(public_id=parsed).first() if parsed else None)


CHANNELS = ResourceSchema(
    "mail_channels",
    TAG,
    CHANNEL_ID,
    serializer=MailChannelSerializer,
    example=CHANNEL_EXAMPLE,
    example_name="A channel",
)


class MailChannelListApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "POST": MANAGE}

    @CHANNELS.list_page(
        "List e-mail channels",
        "The client's support addresses and how their mail comes in. Secrets are "
        "never returned: `has_webhook_secret` and `has_imap_password` say whether one is saved. "
        "Needs the admin role.",
    )
    def get(self, request: Request) -> Response:
        return self.list_response(mail_channel_list, MailChannelSerializer)

    @CHANNELS.create(
        "Add an e-mail channel",
        "A provider's inbound webhook needs `webhook_secret` (its signing key, or "
        "the `user:password` it posts with); IMAP needs host, user and password. The answer "
        "carries `inbound_url`, the address to give the provider. Needs the admin role.",
        request=MailChannelWriteSerializer,
        invalid=INVALID_WRITE,
        requests={
            "Mailgun": {
                "address": "support@shop.example",
                "inbound_via": "mailgun",
                "webhook_secret": "key-3ax6xnjp29jd6fds4gc373sgvjxteol0",
            }
        },
    )
    def post(self, request: Request) -> Response:
        body = validated_body(MailChannelWriteSerializer, request)
        channel = mail_channel_create(client=self.client, **body)
        return Response(MailChannelSerializer(channel).data, status=status.HTTP_201_CREATED)


class MailChannelDetailApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "PATCH": MANAGE, "DELETE": MANAGE}

    @CHANNELS.retrieve("Read an e-mail channel", "Needs the admin role.")
    def get(self, request: Request, channel_id: str) -> Response:
        return Response(MailChannelSerializer(_channel_or_404(self, channel_id)).data)

    @CHANNELS.update(
        "Change an e-mail channel",
        "Changes the given settings, checked as on create. An empty or absent "
        "secret keeps the saved one. Needs the admin role.",
        request=MailChannelWriteSerializer(partial=True),
        invalid=INVALID_WRITE,
        requests={"Disable": {"enabled": False}},
    )
    def patch(self, request: Request, channel_id: str) -> Response:
        channel = _channel_or_404(self, channel_id)
        body = validated_body(MailChannelWriteSerializer, request, partial=True)
        updated = mail_channel_update(client=self.client, channel=channel, **body)
        return Response(MailChannelSerializer(updated).data)

    @CHANNELS.operation(
        "destroy",
        "Delete an e-mail channel",
        "Deletes a channel that has no e-mails. One with e-mails answers 409 (they "
        "belong to conversations): disable it instead. Needs the admin role.",
        responses={204: None, **error_responses(*AUTH_ERRORS, 404), **CHANNEL_IN_USE},
    )
    def delete(self, request: Request, channel_id: str) -> Response:
        mail_channel_delete(client=self.client, channel=_channel_or_404(self, channel_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationEmailsApi(StaffAPIView):
    required_roles = {"GET": READ}

    @extend_schema(
        operation_id="conversations_emails_list",
        tags=["conversations"],
        summary="A conversation's e-mails",
        description="Every e-mail of an e-mail conversation as it was, in and out, oldest "
        "first, with what became of each (`disposition`) and its attachments. Empty for a "
        "widget conversation. Needs the viewer role.",
        parameters=[CONVERSATION_ID, CLIENT_PARAMETER],
        responses={200: MailMessageSerializer(many=True), **error_responses(*AUTH_ERRORS, 404)},
        examples=[OpenApiExample("A page", value=MAIL_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, public_id: str) -> Response:
        conversation = found_or_404(conversation_get(client=self.client, public_id=public_id))
        return self.list_response(mail_thread, MailMessageSerializer, conversation=conversation)
