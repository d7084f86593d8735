"""/api/v1/events/ (included by config/api_urls.py)."""

from apps.api.routes import resource_routes
from apps.events.apis import (
    DeliveryListApi,
    DeliveryResendApi,
    SubscriptionDetailApi,
    SubscriptionListApi,
)

urlpatterns = [
    *resource_routes(
        "subscriptions",
        "api-event-subscription",
        id_name="subscription_id",
        list_view=SubscriptionListApi,
        detail_view=SubscriptionDetailApi,
    ),
    *resource_routes(
        "deliveries",
        "api-event-delivery",
        id_name="delivery_id",
        list_view=DeliveryListApi,
        actions={"resend": DeliveryResendApi},
    ),
]
