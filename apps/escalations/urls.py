from django.urls import path

from apps.escalations.apis import EscalationListApi, EscalationResolveApi

urlpatterns = [
    path("escalations/", EscalationListApi.as_view(), name="api-escalation-list"),
    path(
        "escalations/<str:escalation_id>/resolve",
        EscalationResolveApi.as_view(),
        name="api-escalation-resolve",
    ),
]
