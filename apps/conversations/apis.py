"""Staff / back-office conversation API (docs/api.md): list, read everything
(internal reasoning included), reply as staff."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    choice_parameter,
    error_responses,
    found_or_404,
)
from apps.api.serializers import validated_body
from apps.conversations.models import Channel, ConversationStatus
from apps.conversations.selectors import conversation_get, conversation_list
from apps.conversations.serializers import MessageSerializer
from apps.conversations.services import MAX_MESSAGE_CHARS
from apps.escalations.apis import ESCALATION_EXAMPLE, EscalationSerializer
from apps.escalations.services import staff_reply
from apps.reasoning.models import TraceStatus
from apps.reasoning.selectors import conversation_detail

TAG = "conversations"

# ---------------------------------------------------------------------------------------------
# Serializers
# ---------------------------------------------------------------------------------------------


class ConversationFilterSerializer(serializers.Serializer):
    """Query-string filters of the conversation list (validated; errors name the field)."""

    status = serializers.ChoiceField(choices=ConversationStatus.choices, required=False)
    created_after = serializers.DateField(required=False, input_formats=["%Y-%m-%d"])
    created_before = serializers.DateField(required=False, input_formats=["%Y-%m-%d"])
    has_escalation = serializers.BooleanField(required=False, allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        after, before = attrs.get("created_after"), attrs.get("created_before")
        if after and before and after > before:
            raise serializers.ValidationError(
                {"created_before": ["Must not be earlier than created_after."]}
            )
        return attrs


class CustomerSerializer(serializers.Serializer):
    """The conversation's customer as the business's site vouched for them (docs/widget.md
    "Identity verification"); an anonymous visitor: id "" and verified false."""

    id = serializers.CharField(source="customer_id", help_text='Verified customer id ("" if none).')
    email = serializers.CharField(source="customer_email", help_text="Signed e-mail, if any.")
    name = serializers.CharField(source="customer_name", help_text="Signed name, if any.")
    verified = serializers.BooleanField(source="customer_verified")
    verified_via = serializers.CharField(
        source="customer_verified_via", help_text='"hmac", "jwt" or "" (not verified).'
    )


class ConversationSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The conversation's public id.")
    status = NamedChoiceField(choices=ConversationStatus, enum_name="ConversationStatus")
    channel = NamedChoiceField(
        choices=Channel,
        enum_name="ConversationChannel",
        help_text="Where the customer writes: the chat widget or e-mail (one thread per "
        "conversation; its e-mails at `…/emails/`).",
    )
    visitor_id = serializers.CharField(help_text="The visitor's identity as the client knows it.")
    language = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_message_at = serializers.DateTimeField(
        allow_null=True, help_text="Last visible message; null before the first one."
    )
    message_count = serializers.IntegerField(help_text="All messages, internal ones included.")
    open_escalation = serializers.BooleanField(
        source="has_open_escalation", help_text="A human currently owns the conversation."
    )
    customer = CustomerSerializer(source="*", help_text="The verified customer, if any.")


class TurnStepSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    name = serializers.CharField(help_text="assess, critique, guard, tool_call, respond …")
    input_summary = serializers.CharField()
    output = serializers.JSONField()
    latency_ms = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    error = serializers.CharField()


class TurnSerializer(serializers.Serializer):
    """One turn: how the assistant processed one customer message (its reasoning trace)."""

    id = serializers.IntegerField()
    user_message = serializers.IntegerField(
        source="user_message.seq", help_text="`seq` of the customer message this turn answered."
    )
    mode = serializers.CharField(help_text="The mode that ran: standard, adaptive or deliberative.")
    model = serializers.CharField()
    status = NamedChoiceField(choices=TraceStatus, enum_name="TurnStatus")
    critique_triggered = serializers.BooleanField()
    critique_reasons = serializers.ListField(child=serializers.CharField())
    context_fetched = serializers.ListField(child=serializers.CharField())
    escalated = serializers.BooleanField()
    tool_calls = serializers.IntegerField()
    llm_calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    duration_ms = serializers.IntegerField()
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    steps = TurnStepSerializer(many=True)


class ConversationDetailSerializer(ConversationSummarySerializer):
    contact_email = serializers.CharField(
        help_text="The address the customer left in the widget for staff replies they miss "
        '("" when none).'
    )
    messages = MessageSerializer(
        many=True, help_text="Every message in order, internal reasoning included."
    )
    turns = TurnSerializer(many=True, source="traces")
    escalations = EscalationSerializer(many=True, help_text="Newest first.")


class StaffReplySerializer(serializers.Serializer):
    # Length and blankness are checked by the service, exactly as for the widget (400 / 413).
    text = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text=f"The reply; sent to the customer as is (1–{MAX_MESSAGE_CHARS} characters "
        "after trimming).",
    )


# ---------------------------------------------------------------------------------------------
# Schema examples
# ---------------------------------------------------------------------------------------------

CONVERSATION_ID = "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10"
SUMMARY_EXAMPLE: dict[str, Any] = {
    "id": CONVERSATION_ID,
    "status": "escalated",
    "visitor_id": "customer-4711",
    "language": "en",
    "created_at": "2026-03-02T09:14:03.120000Z",
    "last_message_at": "2026-03-02T09:16:40.004000Z",
    "message_count": 9,
    "open_escalation": True,
    "customer": {
        "id": "customer-4711",
        "email": "ann@shop.example",
        "name": "Ann",
        "verified": True,
        "verified_via": "jwt",
    },
}
MESSAGE_EXAMPLE: dict[str, Any] = {
    "id": "c2d9a7e4-5b1f-4e8a-9c3d-7f6e5d4c3b2a",
    "seq": 10,
    "role": "staff",
    "visibility": "visible",
    "kind": "text",
    "text": "Hi, I'm Sam from the support team — I've cancelled order TH-12345 for you.",
    "data": {"author": "sam@shop.example"},
    "created_at": "2026-03-02T09:18:12.500000Z",
}
DETAIL_EXAMPLE: dict[str, Any] = {
    **SUMMARY_EXAMPLE,
    "message_count": 3,
    "contact_email": "",
    "messages": [
        {
            "id": "a1f0c3d2-6e5b-4a79-8c1d-2e3f4a5b6c7d",
            "seq": 1,
            "role": "user",
            "visibility": "visible",
            "kind": "text",
            "text": "Where is my order TH-12345?",
            "data": {},
            "created_at": "2026-03-02T09:14:05.000000Z",
        },
        {
            "id": "b4e2d1c0-7f6a-4b98-9d2e-3f4a5b6c7d8e",
            "seq": 2,
            "role": "assistant",
            "visibility": "internal",
            "kind": "assessment",
            "text": "Confidence 9/10; tool get_order_status.",
            "data": {"confidence": 9, "tool_call": "get_order_status"},
            "created_at": "2026-03-02T09:14:06.200000Z",
        },
        {
            "id": "d6c5b4a3-8e7f-4a0b-8e3f-4a5b6c7d8e9f",
            "seq": 3,
            "role": "assistant",
            "visibility": "visible",
            "kind": "text",
            "text": "Order TH-12345 shipped yesterday.",
            "data": {"mode": "adaptive"},
            "created_at": "2026-03-02T09:14:07.900000Z",
        },
    ],
    "turns": [
        {
            "id": 88,
            "user_message": 1,
            "mode": "adaptive",
            "model": "gpt-4o-mini",
            "status": "done",
            "critique_triggered": False,
            "critique_reasons": [],
            "context_fetched": [],
            "escalated": False,
            "tool_calls": 1,
            "llm_calls": 2,
            "prompt_tokens": 812,
            "completion_tokens": 96,
            "duration_ms": 1840,
            "error": "",
            "created_at": "2026-03-02T09:14:05.100000Z",
            "steps": [
                {
                    "index": 1,
                    "name": "assess",
                    "input_summary": "minimal context, 3 messages",
                    "output": {"confidence": 9, "tool_call": "get_order_status"},
                    "latency_ms": 900,
                    "prompt_tokens": 640,
                    "completion_tokens": 60,
                    "error": "",
                }
            ],
        }
    ],
    "escalations": [{**ESCALATION_EXAMPLE, "conversation": CONVERSATION_ID}],
}

DATE_HELP = "YYYY-MM-DD, inclusive (the project's time zone, UTC by default)."
LIST_PARAMETERS = [
    choice_parameter("status", ConversationStatus, "Only conversations in this status."),
    OpenApiParameter(
        "created_after",
        OpenApiTypes.DATE,
        description=f"Only conversations created on or after this day; {DATE_HELP}",
    ),
    OpenApiParameter(
        "created_before",
        OpenApiTypes.DATE,
        description=f"Only conversations created on or before this day; {DATE_HELP}",
    ),
    OpenApiParameter(
        "has_escalation",
        OpenApiTypes.BOOL,
        description="true: only conversations that were ever escalated (open or resolved); "
        "false: only ones that never were.",
    ),
    CLIENT_PARAMETER,
]
PUBLIC_ID_PARAMETER = OpenApiParameter(
    "public_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="The conversation's public id (the `id` in every conversation JSON).",
)


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------


CONVERSATIONS = ResourceSchema("conversations", TAG, PUBLIC_ID_PARAMETER)


class ConversationListApi(StaffAPIView):
    required_roles = {"GET": READ}

    @CONVERSATIONS.list_page(
        "List conversations",
        "The client's conversations, newest first, one page at a time. Needs the viewer role.",
        parameters=LIST_PARAMETERS,
        serializer=ConversationSummarySerializer,
        example=SUMMARY_EXAMPLE,
        filtered=True,
    )
    def get(self, request: Request) -> Response:
        return self.list_response(
            conversation_list, ConversationSummarySerializer, filters=ConversationFilterSerializer
        )


class ConversationDetailApi(StaffAPIView):
    required_roles = {"GET": READ}

    @CONVERSATIONS.operation(
        "retrieve",
        "Read a conversation",
        "The whole conversation as staff see it: every message (internal reasoning "
        "included, with kind / visibility / data), every turn with its reasoning steps, and "
        "its escalations. Needs the viewer role.",
        responses={
            200: ConversationDetailSerializer,
            **error_responses(*AUTH_ERRORS, 404),
        },
        examples=[OpenApiExample("A short conversation", value=DETAIL_EXAMPLE)],
    )
    def get(self, request: Request, public_id: str) -> Response:
        conversation = found_or_404(conversation_detail(client=self.client, public_id=public_id))
        return Response(ConversationDetailSerializer(conversation).data)


class ConversationMessageCreateApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @CONVERSATIONS.create(
        "Reply to the customer as staff",
        "Posts a visible staff message. Replying takes ownership: if the assistant "
        "still owned the conversation it is escalated (reason `staff_takeover`) so no AI "
        "answers over the person; hand it back by resolving the escalation. The author is the "
        "signed-in staff user (none for API keys). Needs the agent role.",
        action="messages_create",
        member=True,
        request=StaffReplySerializer,
        invalid=("text", "Must not be empty."),
        errors=(413,),
        body=MessageSerializer,
        requests={"Reply": {"text": "I've cancelled order TH-12345 for you."}},
        created=MESSAGE_EXAMPLE,
    )
    def post(self, request: Request, public_id: str) -> Response:
        conversation = found_or_404(conversation_get(client=self.client, public_id=public_id))
        body = validated_body(StaffReplySerializer, request)
        message = staff_reply(
            client=self.client,
            conversation=conversation,
            text=body["text"],
            author=acting_user(request),
        )
        return Response(MessageSerializer(message).data, status=status.HTTP_201_CREATED)
