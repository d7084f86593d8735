"""/api/v1/events/ (included by config/api_urls.py)."""

from django.urls import path

from apps.events.apis import (
    DeliveryListApi,
    DeliveryResendApi,
    SubscriptionDetailApi,
    SubscriptionListApi,
)

urlpatterns = [
    path("subscriptions/", SubscriptionListApi.as_view(), name="api-event-subscription-list"),
    path(
        "subscriptions/<str:subscription_id>/",
        SubscriptionDetailApi.as_view(),
        name="api-event-subscription-detail",
    ),
    path("deliveries/", DeliveryListApi.as_view(), name="api-event-delivery-list"),
    path(
        "deliveries/<str:delivery_id>/resend",
        DeliveryResendApi.as_view(),
        name="api-event-delivery-resend",
    ),
]
