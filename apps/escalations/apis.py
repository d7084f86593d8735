"""Staff / back-office escalation API: the queue and handing a conversation back to the AI."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    choice_parameter,
    found_or_404,
    invalid_example,
    page_schema,
    public_id_path_parameter,
    write_responses,
)
from apps.api.serializers import validated_body
from apps.conversations.models import Conversation, ConversationStatus
from apps.conversations.selectors import conversation_get
from apps.escalations.models import EscalationReason, EscalationStatus
from apps.escalations.selectors import (
    escalation_get,
    escalation_list,
    escalation_open_for_conversation,
    staff_note_list,
)
from apps.escalations.services import (
    MAX_NOTE_CHARS,
    assignable_member,
    conversation_assign,
    conversation_note_add,
    conversation_takeover,
)
from apps.reasoning.handback import conversation_hand_back, escalation_hand_back

TAG = "escalations"


class EscalationFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=EscalationStatus.choices, required=False)


class EscalationSerializer(serializers.Serializer):
    id = serializers.UUIDField(
        source="public_id", help_text="The escalation's public id (opaque, not a counter)."
    )
    conversation = serializers.UUIDField(
        source="conversation.public_id", help_text="The conversation's public id."
    )
    reason = NamedChoiceField(choices=EscalationReason, enum_name="EscalationReason")
    status = NamedChoiceField(choices=EscalationStatus, enum_name="EscalationStatus")
    detail = serializers.CharField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    assigned_to = serializers.EmailField(
        source="assigned_to.email",
        allow_null=True,
        help_text="E-mail of the staff member who owns it (the first to reply); null if nobody.",
    )


ESCALATION_EXAMPLE: dict[str, Any] = {
    "id": "0b6f3c2e-8d4a-4c1f-9e7b-5a2d1c3b4e6f",
    "conversation": "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10",
    "reason": "customer_request",
    "status": "open",
    "detail": "Customer asked for a human.",
    "created_at": "2026-03-02T09:16:40.004000Z",
    "resolved_at": None,
    "assigned_to": "sam@shop.example",
}

ESCALATION_ID_PARAMETER = public_id_path_parameter("escalation_id", "The escalation's public id.")


ESCALATIONS = ResourceSchema("escalations", TAG, ESCALATION_ID_PARAMETER)


class EscalationListApi(StaffAPIView):
    required_roles = {"GET": READ}

    @ESCALATIONS.list_page(
        "List escalations",
        "The client's escalations, newest first, one page at a time. An open "
        "escalation means a person owns the conversation and the AI stays silent. Needs the "
        "viewer role.",
        parameters=[
            choice_parameter("status", EscalationStatus, "Only escalations in this status."),
            CLIENT_PARAMETER,
        ],
        serializer=EscalationSerializer,
        example=ESCALATION_EXAMPLE,
        invalid=invalid_example("status", '"pending" is not a valid choice.'),
    )
    def get(self, request: Request) -> Response:
        return self.list_response(
            escalation_list, EscalationSerializer, filters=EscalationFilterSerializer
        )


class EscalationResolveApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @ESCALATIONS.action(
        "resolve",
        "Resolve an escalation (hand back to the AI)",
        "Marks the escalation resolved, reopens the conversation for the assistant "
        "and tells the customer. Resolving an already resolved escalation changes nothing and "
        "answers 200 with it as it is. No request body. Needs the agent role.",
        body=EscalationSerializer,
        answer={
            **ESCALATION_EXAMPLE,
            "status": "resolved",
            "resolved_at": "2026-03-02T09:30:00.000000Z",
        },
        answer_name="Resolved",
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = found_or_404(escalation_get(client=self.client, escalation_id=escalation_id))
        escalation_hand_back(client=self.client, escalation=escalation, actor=acting_user(request))
        resolved = escalation_get(client=self.client, escalation_id=escalation.pk)
        return Response(EscalationSerializer(resolved).data)


# ---------------------------------------------------------------------------------------------
# The inbox: step in, assign / claim, hand back, staff notes — per conversation
# ---------------------------------------------------------------------------------------------

CONVERSATION_ID_PARAMETER = public_id_path_parameter("public_id", "The conversation's public id.")
INBOX_TAG = "conversations"


class ConversationOwnershipSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The conversation's public id.")
    status = NamedChoiceField(choices=ConversationStatus, enum_name="ConversationStatus")
    assignee = serializers.EmailField(
        source="assignee.email",
        allow_null=True,
        help_text="E-mail of the teammate who owns it in the inbox; null if nobody.",
    )
    open_escalation = EscalationSerializer(
        allow_null=True,
        help_text="The open hand-off (a person owns the conversation); null when the "
        "assistant does.",
    )


class _NoUnknownFields(serializers.Serializer):
    """Refuses a key the operation does not read (`400` naming it) rather than ignoring it: a
    misspelt `answer_waiting` must not silently hand back with the default."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = (
            sorted(set(self.initial_data) - set(self.fields))
            if isinstance(self.initial_data, dict)
            else []
        )
        if unknown:
            raise serializers.ValidationError({key[:64]: ["Unknown field."] for key in unknown})
        return attrs


class AssignSerializer(_NoUnknownFields):
    assignee = serializers.EmailField(
        allow_null=True,
        help_text="E-mail of a teammate of this client (agent role or above); null unassigns.",
    )


class HandBackSerializer(_NoUnknownFields):
    answer_waiting = serializers.BooleanField(
        required=False,
        default=True,
        help_text="true (default): the assistant answers the customer's message staff left "
        "unanswered; false: hand back without answering (the assistant waits for the "
        "customer's next message).",
    )


class StaffNoteSerializer(_NoUnknownFields):
    id = serializers.UUIDField(source="public_id", read_only=True)
    text = serializers.CharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text=f"The note (1–{MAX_NOTE_CHARS} characters after trimming). Internal: the "
        "customer never sees it and no prompt reads it.",
    )
    author = serializers.EmailField(source="author.email", allow_null=True, read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


OWNERSHIP_EXAMPLE: dict[str, Any] = {
    "id": ESCALATION_EXAMPLE["conversation"],
    "status": "escalated",
    "assignee": "sam@shop.example",
    "open_escalation": {**ESCALATION_EXAMPLE, "reason": "staff_takeover"},
}
NOTE_EXAMPLE: dict[str, Any] = {
    "id": "5f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f",
    "text": "Customer is a wholesale buyer; check their account before refunding.",
    "author": "sam@shop.example",
    "created_at": "2026-03-02T09:20:00.000000Z",
}


INBOX = ResourceSchema("conversations", INBOX_TAG, CONVERSATION_ID_PARAMETER)


class _ConversationApi(StaffAPIView):
    def conversation(self, public_id: str) -> Conversation:
        return found_or_404(conversation_get(client=self.client, public_id=public_id))

    def ownership(self, conversation: Conversation) -> Response:
        fresh = (
            Conversation.objects.for_client(self.client)
            .select_related("assignee")
            .get(pk=conversation.pk)
        )
        fresh.open_escalation = escalation_open_for_conversation(  # type: ignore[attr-defined]
            client=self.client, conversation=fresh
        )
        return Response(ConversationOwnershipSerializer(fresh).data)


class ConversationTakeoverApi(_ConversationApi):
    required_roles = {"POST": SUPPORT}

    @INBOX.action(
        "takeover",
        "Take over a conversation",
        "Staff step in: the assistant goes silent at once (a reply it was still "
        "writing is not posted), the customer sees that a person joined, and the caller (a "
        "staff session) owns the conversation. Taking over a conversation already with staff "
        "only claims it. No request body. Needs the agent role.",
        body=ConversationOwnershipSerializer,
        answer=OWNERSHIP_EXAMPLE,
        answer_name="Taken over",
    )
    def post(self, request: Request, public_id: str) -> Response:
        conversation = self.conversation(public_id)
        conversation_takeover(
            client=self.client, conversation=conversation, actor=acting_user(request)
        )
        return self.ownership(conversation)


class ConversationAssignApi(_ConversationApi):
    required_roles = {"POST": SUPPORT}

    @INBOX.operation(
        "assign",
        "Assign a conversation to a teammate",
        "Gives the conversation to a teammate (agent role or above) by e-mail — "
        "your own address claims it — or to nobody (`null`). Assigning does not take over: a "
        "conversation the assistant handles stays the assistant's. Needs the agent role.",
        request=AssignSerializer,
        responses=write_responses(
            200,
            ConversationOwnershipSerializer,
            "assignee",
            "No teammate of this client (agent or above) has this e-mail address.",
        ),
        examples=[
            OpenApiExample("Assign", value={"assignee": "sam@shop.example"}, request_only=True),
            OpenApiExample("Assigned", value=OWNERSHIP_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request, public_id: str) -> Response:
        conversation = self.conversation(public_id)
        email = validated_body(AssignSerializer, request)["assignee"]
        assignee = assignable_member(client=self.client, email=email) if email is not None else None
        conversation_assign(
            client=self.client,
            conversation=conversation,
            assignee=assignee,
            actor=acting_user(request),
        )
        return self.ownership(conversation)


class ConversationHandBackApi(_ConversationApi):
    required_roles = {"POST": SUPPORT}

    @INBOX.operation(
        "handback",
        "Hand a conversation back to the assistant",
        "Resolves the open hand-off: the assistant owns the conversation again and "
        "the customer is told. With `answer_waiting` (default true) the assistant answers the "
        "customer's message staff left unanswered; false hands back without answering. A "
        "conversation the assistant already owns is answered as it is. Needs the agent role.",
        request=HandBackSerializer,
        responses=write_responses(
            200, ConversationOwnershipSerializer, "answer_waiting", "Must be a valid boolean."
        ),
        examples=[
            OpenApiExample("Without answering", value={"answer_waiting": False}, request_only=True),
            OpenApiExample(
                "Handed back",
                value={
                    **OWNERSHIP_EXAMPLE,
                    "status": "open",
                    "assignee": None,
                    "open_escalation": None,
                },
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request, public_id: str) -> Response:
        conversation = self.conversation(public_id)
        body = validated_body(HandBackSerializer, request)
        conversation_hand_back(
            client=self.client,
            conversation=conversation,
            actor=acting_user(request),
            answer_waiting=body["answer_waiting"],
        )
        return self.ownership(conversation)


class ConversationNotesApi(_ConversationApi):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @INBOX.operation(
        "notes_list",
        "List a conversation's staff notes",
        "The team's internal notes on the conversation, oldest first, one page at "
        "a time. Needs the viewer role.",
        **page_schema(StaffNoteSerializer, NOTE_EXAMPLE),
    )
    def get(self, request: Request, public_id: str) -> Response:
        conversation = self.conversation(public_id)
        return self.list_response(staff_note_list, StaffNoteSerializer, conversation=conversation)

    @INBOX.create(
        "Add a staff note",
        "An internal note for the team: the customer never sees it, and no "
        "prompt reads it. The author is the signed-in staff user (none for API keys). Needs "
        "the agent role.",
        action="notes_create",
        member=True,
        request=StaffNoteSerializer,
        invalid=("text", "Write the note first."),
        body=StaffNoteSerializer,
        requests={"Note": {"text": NOTE_EXAMPLE["text"]}},
        created=NOTE_EXAMPLE,
    )
    def post(self, request: Request, public_id: str) -> Response:
        conversation = self.conversation(public_id)
        body = validated_body(StaffNoteSerializer, request)
        note = conversation_note_add(
            client=self.client,
            conversation=conversation,
            text=body["text"],
            author=acting_user(request),
        )
        return Response(StaffNoteSerializer(note).data, status=status.HTTP_201_CREATED)
