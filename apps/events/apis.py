"""Events out API (docs/events.md): the client's subscriptions (list, create, read, change,
delete) and their delivery log (list, resend). Every endpoint needs the admin role: a
subscription sends the client's conversations to another system."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import MANAGE, StaffAPIView
from apps.api.schema import (
    AUTH_ERRORS,
    CLIENT_PARAMETER,
    NamedChoiceField,
    ResourceSchema,
    enum_values,
    error_responses,
    public_id_path_parameter,
)
from apps.api.serializers import validated_body
from apps.events.models import (
    DeliveryStatus,
    EventDelivery,
    EventSubscription,
    EventType,
    SubscriptionFormat,
)
from apps.events.selectors import delivery_get, delivery_list, subscription_get, subscription_list
from apps.events.services import (
    delivery_resend,
    subscription_create,
    subscription_delete,
    subscription_update,
)

TAG = "events"


class SubscriptionSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    name = serializers.CharField(max_length=100, required=False, allow_blank=True)
    url = serializers.URLField(max_length=500, help_text="The https endpoint events are sent to.")
    format = NamedChoiceField(
        choices=SubscriptionFormat,
        enum_name="SubscriptionFormat",
        required=False,
        help_text="`events`: signed JSON events; `chat`: a Slack / Teams alert "
        '`{"text": …}` for hand-offs and approvals.',
    )
    event_types = serializers.ListField(
        child=NamedChoiceField(choices=EventType, enum_name="EventType"),
        help_text="The events this endpoint receives.",
    )
    include_customer_text = serializers.BooleanField(
        required=False,
        help_text="Send what the customer and staff wrote, and tool params and results "
        "(default off).",
    )
    active = serializers.BooleanField(required=False)
    created_at = serializers.DateTimeField(read_only=True)


class NewSubscriptionSerializer(SubscriptionSerializer):
    secret = serializers.CharField(
        read_only=True,
        help_text="The Standard Webhooks signing secret (`whsec_…`): shown this once only.",
    )


class DeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk", help_text="The delivery's number.")
    event_id = serializers.UUIDField(help_text="The event's id: the `webhook-id` header.")
    event_type = NamedChoiceField(choices=EventType, enum_name="EventType")
    subscription = serializers.UUIDField(source="subscription.public_id")
    conversation = serializers.UUIDField(source="conversation_public_id", allow_null=True)
    payload = serializers.JSONField(help_text="The body as sent.")
    status = NamedChoiceField(choices=DeliveryStatus, enum_name="DeliveryStatus")
    attempts = serializers.IntegerField()
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    latency_ms = serializers.IntegerField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class DeliveryFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=DeliveryStatus.choices, required=False)
    type = serializers.ChoiceField(choices=EventType.choices, required=False)
    subscription = serializers.UUIDField(required=False)


SUBSCRIPTION_EXAMPLE: dict[str, Any] = {
    "id": "5b1f6a2e-8c0d-4d7e-9f3a-2b6c1d0e9f84",
    "name": "CRM",
    "url": "https://crm.example.com/guidedesk/events",
    "format": "events",
    "event_types": ["conversation.handed_off", "conversation.rated"],
    "include_customer_text": False,
    "active": True,
    "created_at": "2026-03-02T09:15:30.000000Z",
}
SUBSCRIPTION_ID = public_id_path_parameter("subscription_id", "The subscription's id.")
DELIVERY_ID = OpenApiParameter(
    "delivery_id",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The delivery's number (`id`) or its event id.",
)


def _subscription_or_404(view: StaffAPIView, subscription_id: str) -> EventSubscription:
    subscription = subscription_get(client=view.client, subscription_id=subscription_id)
    if subscription is None:
        raise exceptions.NotFound("No such subscription.")
    return subscription


def _changes(data: dict[str, Any]) -> dict[str, Any]:
    changes = dict(data)
    if "format" in changes:
        changes["fmt"] = changes.pop("format")
    return changes


SUBSCRIPTIONS = ResourceSchema(
    "events_subscriptions", TAG, SUBSCRIPTION_ID, serializer=SubscriptionSerializer
)
DELIVERIES = ResourceSchema("events_deliveries", TAG, DELIVERY_ID)


class SubscriptionListApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "POST": MANAGE}

    @SUBSCRIPTIONS.list_page(
        "List event subscriptions",
        "The client's endpoints and the events each receives. Needs the admin role.",
        example=SUBSCRIPTION_EXAMPLE,
    )
    def get(self, request: Request) -> Response:
        return self.list_response(subscription_list, SubscriptionSerializer)

    @SUBSCRIPTIONS.create(
        "Subscribe an endpoint",
        "A new subscription and its signing secret, shown in this answer only. "
        "The URL must be https and reach a public address. A `chat` subscription takes "
        "`conversation.handed_off` and `approval.requested` only. Needs the admin role.",
        request=SubscriptionSerializer,
        invalid=("event_types", "Choose at least one event type."),
        body=NewSubscriptionSerializer,
        created={**SUBSCRIPTION_EXAMPLE, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
    )
    def post(self, request: Request) -> Response:
        body = validated_body(SubscriptionSerializer, request)
        subscription = subscription_create(client=self.client, **_changes(body))
        return Response(
            NewSubscriptionSerializer(subscription).data, status=status.HTTP_201_CREATED
        )


class SubscriptionDetailApi(StaffAPIView):
    required_roles = {"GET": MANAGE, "PATCH": MANAGE, "DELETE": MANAGE}

    @SUBSCRIPTIONS.retrieve("Read a subscription")
    def get(self, request: Request, subscription_id: str) -> Response:
        return Response(SubscriptionSerializer(_subscription_or_404(self, subscription_id)).data)

    @SUBSCRIPTIONS.update(
        "Change a subscription",
        "Changes the given fields, validated as on create. The secret stays.",
        request=SubscriptionSerializer(partial=True),
    )
    def patch(self, request: Request, subscription_id: str) -> Response:
        subscription = _subscription_or_404(self, subscription_id)
        body = validated_body(SubscriptionSerializer, request, partial=True)
        subscription = subscription_update(
            client=self.client, subscription=subscription, **_changes(body)
        )
        return Response(SubscriptionSerializer(subscription).data)

    @SUBSCRIPTIONS.destroy(
        "Delete a subscription", "Deletes the subscription and its delivery log."
    )
    def delete(self, request: Request, subscription_id: str) -> Response:
        subscription_delete(
            client=self.client, subscription=_subscription_or_404(self, subscription_id)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryListApi(StaffAPIView):
    required_roles = {"GET": MANAGE}

    @DELIVERIES.operation(
        "list",
        "List deliveries",
        "Every event sent (or being sent) to the client's endpoints, newest "
        "first: status, attempts, the last answer and its latency, the next attempt. Needs "
        "the admin role.",
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=enum_values(DeliveryStatus)),
            OpenApiParameter("type", OpenApiTypes.STR, enum=enum_values(EventType)),
            OpenApiParameter("subscription", OpenApiTypes.UUID),
            CLIENT_PARAMETER,
        ],
        responses={200: DeliverySerializer(many=True), **error_responses(400, *AUTH_ERRORS, 404)},
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(DeliveryFilterSerializer)
        subscription = None
        if "subscription" in filters:
            subscription = _subscription_or_404(self, str(filters["subscription"]))
        rows = delivery_list(
            client=self.client,
            subscription=subscription,
            status=filters.get("status"),
            event_type=filters.get("type"),
        )
        return self.paginated_response(rows, DeliverySerializer)


class DeliveryResendApi(StaffAPIView):
    required_roles = {"POST": MANAGE}

    @DELIVERIES.action(
        "resend",
        "Resend a delivery",
        "Sends the delivery again as it was: same payload, same `webhook-id` "
        "(your endpoint deduplicates on it), a fresh retry schedule. No request body.",
        body=DeliverySerializer,
    )
    def post(self, request: Request, delivery_id: str) -> Response:
        delivery: EventDelivery | None = delivery_get(client=self.client, delivery_id=delivery_id)
        if delivery is None:
            raise exceptions.NotFound("No such delivery.")
        return Response(
            DeliverySerializer(delivery_resend(client=self.client, delivery=delivery)).data
        )
