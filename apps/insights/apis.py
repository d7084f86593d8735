"""Staff / back-office flag-and-teach API (docs/api.md, "Flags and teaching"): flag one of the
assistant's replies (optionally proposing its correction as a note, FAQ or article for review),
list the flags, and propose a staff reply for review."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    public_id_path_parameter,
    write_responses,
)
from apps.api.serializers import validated_body
from apps.clients.models import Client
from apps.conversations.models import Message
from apps.conversations.selectors import conversation_get
from apps.flags.models import FlagReason, MessageFlag
from apps.flags.selectors import flag_get, flag_list, flaggable_message_get
from apps.flags.services import MAX_CORRECTION_CHARS
from apps.insights.models import InsightProposal, ProposalKind
from apps.insights.teach import flag_and_teach, staff_reply_teach

TAG = "flags"
TEACH_CHOICES = [ProposalKind.NOTE, ProposalKind.FAQ, ProposalKind.ARTICLE]


def _named_message(client: Client, data: dict[str, Any]) -> Message:
    """The client's message the request body names (`message`: its public id), else 404."""
    message = flaggable_message_get(client=client, message_id=str(data["message"]))
    if message is None:
        raise exceptions.NotFound("No such message.")
    return message


class ProposalRefSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    kind = serializers.CharField()
    status = serializers.CharField()
    title = serializers.CharField()


class FlagSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    conversation = serializers.UUIDField(source="conversation.public_id")
    message = serializers.UUIDField(source="message.public_id")
    message_seq = serializers.IntegerField(source="message.seq")
    reason = NamedChoiceField(choices=FlagReason, enum_name="FlagReason")
    correction = serializers.CharField()
    flagged_by = serializers.EmailField(source="flagged_by.email", allow_null=True)
    created_at = serializers.DateTimeField()


class FlagCreatedSerializer(FlagSerializer):
    proposal = ProposalRefSerializer(allow_null=True)


class FlagCreateSerializer(serializers.Serializer):
    message = serializers.UUIDField(help_text="The assistant reply's public id.")
    reason = serializers.ChoiceField(choices=FlagReason.choices)
    correction = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_CORRECTION_CHARS
    )
    teach_as = serializers.ChoiceField(
        choices=[(k.value, k.label) for k in TEACH_CHOICES],
        required=False,
        allow_blank=True,
        help_text="Also propose the correction for review as a note, an FAQ or an article.",
    )


class FlagFilterSerializer(serializers.Serializer):
    conversation = serializers.UUIDField(required=False)


class StaffReplyTeachSerializer(serializers.Serializer):
    message = serializers.UUIDField(help_text="The staff reply's public id.")
    teach_as = serializers.ChoiceField(
        choices=[(k.value, k.label) for k in TEACH_CHOICES], default=ProposalKind.FAQ
    )


FLAG_EXAMPLE: dict[str, Any] = {
    "id": "2c9d6f1e-7b3a-4e5d-8c2f-1a0b9e8d7c6b",
    "conversation": "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10",
    "message": "a3e1c4d2-5b6f-4a7e-8d9c-0b1a2c3d4e5f",
    "message_seq": 4,
    "reason": "wrong",
    "correction": "Boots can be returned within 60 days, not 30.",
    "flagged_by": "sam@shop.example",
    "created_at": "2026-03-02T09:16:40.004000Z",
}
PROPOSAL_EXAMPLE = {
    "id": "9e8d7c6b-5a4f-4e3d-2c1b-0a9f8e7d6c5b",
    "kind": "faq",
    "status": "pending_review",
    "title": "Flagged answer: Can I return boots after 40 days?",
}


def _flag_data(flag: MessageFlag, proposal: InsightProposal | None) -> dict[str, Any]:
    flag.proposal = proposal  # type: ignore[attr-defined]
    return dict(FlagCreatedSerializer(flag).data)


FLAG_ID = public_id_path_parameter("flag_id", "The flag's id.")


FLAGS = ResourceSchema(
    "flags", TAG, FLAG_ID, serializer=FlagSerializer, example=FLAG_EXAMPLE, example_name="A flag"
)


class FlagListApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @FLAGS.list_page(
        "List flagged answers",
        "The client's flags on assistant replies, newest first (of one "
        "conversation with `?conversation=`). Needs the viewer role.",
        parameters=[
            OpenApiParameter(
                "conversation", OpenApiTypes.UUID, description="Only this conversation's flags."
            ),
            CLIENT_PARAMETER,
        ],
        filtered=True,
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(FlagFilterSerializer)
        conversation = None
        if "conversation" in filters:
            conversation = conversation_get(
                client=self.client, public_id=str(filters["conversation"])
            )
            if conversation is None:
                raise exceptions.NotFound("No such conversation.")
        return self.list_response(flag_list, FlagSerializer, conversation=conversation)

    @FLAGS.create(
        "Flag an assistant reply",
        "Marks one of the assistant's visible replies as wrong, unhelpful or "
        "unsafe, with an optional correction. With `teach_as` (note, faq or article) the "
        "correction also becomes a proposal waiting for review (`proposal` in the answer): "
        "nothing reaches the assistant's prompts until staff approve it. Needs the agent role.",
        request=FlagCreateSerializer,
        invalid=("message", "Only the assistant's replies can be flagged."),
        body=FlagCreatedSerializer,
        requests={
            "Flag and teach": {
                "message": FLAG_EXAMPLE["message"],
                "reason": "wrong",
                "correction": FLAG_EXAMPLE["correction"],
                "teach_as": "faq",
            }
        },
        created={**FLAG_EXAMPLE, "proposal": PROPOSAL_EXAMPLE},
        created_name="Flagged",
    )
    def post(self, request: Request) -> Response:
        data = validated_body(FlagCreateSerializer, request)
        message = _named_message(self.client, data)
        flag, proposal = flag_and_teach(
            client=self.client,
            message=message,
            reason=data["reason"],
            correction=data.get("correction", ""),
            teach_as=data.get("teach_as", ""),
            actor=acting_user(request),
        )
        return Response(_flag_data(flag, proposal), status=status.HTTP_201_CREATED)


class FlagDetailApi(StaffAPIView):
    required_roles = {"GET": READ}

    @FLAGS.retrieve("Read a flag", "One flag. Needs the viewer role.")
    def get(self, request: Request, flag_id: str) -> Response:
        flag = flag_get(client=self.client, flag_id=flag_id)
        if flag is None:
            raise exceptions.NotFound("No such flag.")
        return Response(FlagSerializer(flag).data)


class StaffReplyTeachApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @extend_schema(
        operation_id="teach_staff_reply",
        tags=[TAG],
        summary="Propose a staff reply for review",
        description="Turns a staff reply into a proposal waiting for review: the customer's "
        "messages before it are the question, the reply is the answer (an FAQ by default; a "
        "note or an article with `teach_as`). Asked again for the same reply while its "
        "proposal waits, it answers that proposal. Needs the agent role.",
        parameters=[CLIENT_PARAMETER],
        request=StaffReplyTeachSerializer,
        responses=write_responses(
            201,
            ProposalRefSerializer,
            "message",
            "Only a staff reply to the customer can be taught from.",
        ),
        examples=[
            OpenApiExample(
                "Teach",
                value={"message": FLAG_EXAMPLE["message"], "teach_as": "faq"},
                request_only=True,
            ),
            OpenApiExample("Proposed", value=PROPOSAL_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        data = validated_body(StaffReplyTeachSerializer, request)
        message = _named_message(self.client, data)
        proposal = staff_reply_teach(client=self.client, message=message, teach_as=data["teach_as"])
        return Response(ProposalRefSerializer(proposal).data, status=status.HTTP_201_CREATED)
