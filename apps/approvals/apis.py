"""Staff / back-office approval API: tool calls held for a teammate's approval, and deciding
them (apps/approvals/services.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    choice_parameter,
    conflict_response,
    error_responses,
    found_or_404,
    invalid_example,
    public_id_path_parameter,
)
from apps.api.serializers import validated_body
from apps.approvals.models import ApprovalStatus
from apps.approvals.selectors import approval_get, approval_list
from apps.approvals.services import MAX_REASON_CHARS, approval_approve, approval_deny

TAG = "approvals"


class ApprovalFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=ApprovalStatus.choices, required=False)


class ApprovalSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The request's public id.")
    conversation = serializers.UUIDField(
        source="conversation.public_id", help_text="The conversation's public id."
    )
    tool = serializers.CharField(source="tool.name", help_text="The tool that would run.")
    params = serializers.JSONField(help_text="The exact parameters it runs with once approved.")
    rule = serializers.JSONField(help_text="The tool's approval rule when it was asked.")
    status = NamedChoiceField(choices=ApprovalStatus, enum_name="ApprovalStatus")
    idempotency_key = serializers.CharField(
        help_text="The key the run uses (the customer's confirmation's): one run per key."
    )
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(
        help_text="Undecided by then, the conversation is handed to a person."
    )
    decided_by = serializers.EmailField(
        source="decided_by.email", allow_null=True, help_text="Who decided; null if nobody."
    )
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(help_text="Why it was denied (the customer is told).")
    execution_status = serializers.CharField(
        source="execution.status",
        allow_null=True,
        help_text="The run's status once approved (succeeded / failed); null before.",
    )
    basis = serializers.JSONField(
        help_text="Why a threshold rule held it: `amount` (this call), `above`, `window_hours`, "
        "`group_tools`, `scopes` ({conversation|customer|order: {`key`, `total`, `calls`: "
        "[{`tool`, `amount`, `at`, `status`, `kind`, `ref`, `conversation`} | the new call "
        "with `this: true`]}}) and `tripped` (the scopes whose sum is over the threshold). "
        "`{}` for an `always` rule."
    )
    withdrawn_at = serializers.DateTimeField(
        allow_null=True, help_text="When the customer's message withdrew it; null if it did not."
    )
    withdrawn_by_message = serializers.IntegerField(
        source="withdrawn_in.seq",
        allow_null=True,
        help_text="The `seq` of the customer message that withdrew it.",
    )
    withdrawn_because = serializers.CharField(
        help_text="`declined` (the customer said no), `new_message` (they wrote about something "
        "else) or empty."
    )


class ApprovalDenySerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=MAX_REASON_CHARS, help_text="Why: the customer is told these words."
    )


EXAMPLE: dict[str, Any] = {
    "id": "3c9b7c1e-1d2f-4e5a-9b8c-7d6e5f4a3b2c",
    "conversation": "7d0b1c8e-2f0a-4b8e-9a51-3c4f2b9e6d10",
    "tool": "refund_order",
    "params": {"order_id": "TH-12345", "amount": 150},
    "rule": {"param": "amount", "above": 100},
    "status": "pending",
    "idempotency_key": "pa-5f1c2b7e",
    "created_at": "2026-03-02T09:15:30.000000Z",
    "expires_at": "2026-03-02T09:45:30.000000Z",
    "decided_by": None,
    "decided_at": None,
    "reason": "",
    "execution_status": None,
    "basis": {
        "param": "amount",
        "above": "100",
        "window_hours": 24,
        "group": "",
        "group_tools": ["refund_order"],
        "amount": "99.99",
        "customer_from": "customer_id",
        "scopes": {
            "order": {
                "key": "order_id=TH-12345",
                "total": "199.99",
                "calls": [
                    {
                        "kind": "execution",
                        "ref": "812",
                        "tool": "refund_order",
                        "amount": "100",
                        "at": "2026-03-02T08:40:00+00:00",
                        "status": "succeeded",
                        "conversation": "0b6c2f0e-5d8a-4f47-9a51-8c1d2e3f4a5b",
                    },
                    {
                        "this": True,
                        "tool": "refund_order",
                        "amount": "99.99",
                        "at": "2026-03-02T09:15:30+00:00",
                        "status": "new",
                    },
                ],
            }
        },
        "tripped": ["order"],
    },
    "withdrawn_at": None,
    "withdrawn_by_message": None,
    "withdrawn_because": "",
}
APPROVAL_ID_PARAMETER = public_id_path_parameter("approval_id", "The request's public id.")
CONFLICT = conflict_response(
    "The request is no longer waiting (decided, withdrawn by the customer, or past "
    "`expires_at`): nothing changed.",
    ("Already decided", "approval_decided", "This request was already decided (Approved)."),
    (
        "Withdrawn by the customer",
        "approval_withdrawn",
        "Withdrawn by the customer at 2026-03-02 09:20 (message #7). Nothing was run.",
    ),
)


APPROVALS = ResourceSchema("approvals", TAG, APPROVAL_ID_PARAMETER, serializer=ApprovalSerializer)


class ApprovalListApi(StaffAPIView):
    required_roles = {"GET": READ}

    @APPROVALS.list_page(
        "List approval requests",
        "Tool calls the client's rules hold for a teammate's approval: waiting "
        "ones first (oldest first), then decided ones, newest first. Needs the viewer role.",
        parameters=[
            choice_parameter("status", ApprovalStatus, "Only requests in this status."),
            CLIENT_PARAMETER,
        ],
        example=EXAMPLE,
        invalid=invalid_example("status", '"open" is not a valid choice.'),
    )
    def get(self, request: Request) -> Response:
        return self.list_response(
            approval_list, ApprovalSerializer, filters=ApprovalFilterSerializer
        )


class ApprovalDetailApi(StaffAPIView):
    required_roles = {"GET": READ}

    @APPROVALS.retrieve("One approval request")
    def get(self, request: Request, approval_id: str) -> Response:
        approval = found_or_404(approval_get(client=self.client, approval_id=approval_id))
        return Response(ApprovalSerializer(approval).data)


class ApprovalApproveApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @APPROVALS.action(
        "approve",
        "Approve: run the held tool call",
        "The call runs once, in a worker, with the exact params and idempotency "
        "key shown, and the customer is told the result. A request that is no longer waiting "
        "(decided, or past `expires_at`) answers 409 and nothing runs; of two concurrent "
        "approvals exactly one succeeds. No request body. Needs the agent role.",
        body=ApprovalSerializer,
        answer={**EXAMPLE, "status": "approved"},
        answer_name="Approved",
        errors=CONFLICT,
    )
    def post(self, request: Request, approval_id: str) -> Response:
        approval = found_or_404(approval_get(client=self.client, approval_id=approval_id))
        approval_approve(client=self.client, approval=approval, actor=acting_user(request))
        return Response(
            ApprovalSerializer(approval_get(client=self.client, approval_id=approval.pk)).data
        )


class ApprovalDenyApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @APPROVALS.operation(
        "deny",
        "Deny: the call never runs, the customer is told why",
        'Body `{"reason": "…"}` (required, at most 500 characters): the '
        "customer is told these words. 409 when the request is no longer waiting. Needs the "
        "agent role.",
        request=ApprovalDenySerializer,
        responses={
            200: ApprovalSerializer,
            **error_responses(
                400,
                *AUTH_ERRORS,
                404,
                invalid=invalid_example("reason", "This field is required."),
            ),
            **CONFLICT,
        },
    )
    def post(self, request: Request, approval_id: str) -> Response:
        approval = found_or_404(approval_get(client=self.client, approval_id=approval_id))
        body = validated_body(ApprovalDenySerializer, request)
        approval_deny(
            client=self.client, approval=approval, actor=acting_user(request), reason=body["reason"]
        )
        return Response(
            ApprovalSerializer(approval_get(client=self.client, approval_id=approval.pk)).data
        )
