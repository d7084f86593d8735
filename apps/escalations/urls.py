from django.urls import path

from apps.escalations.apis import (
    ConversationAssignApi,
    ConversationHandBackApi,
    ConversationNotesApi,
    ConversationTakeoverApi,
    EscalationListApi,
    EscalationResolveApi,
)

urlpatterns = [
    path("escalations/", EscalationListApi.as_view(), name="api-escalation-list"),
    path(
        "escalations/<str:escalation_id>/resolve",
        EscalationResolveApi.as_view(),
        name="api-escalation-resolve",
    ),
    path(
        "conversations/<str:public_id>/takeover",
        ConversationTakeoverApi.as_view(),
        name="api-conversation-takeover",
    ),
    path(
        "conversations/<str:public_id>/assign",
        ConversationAssignApi.as_view(),
        name="api-conversation-assign",
    ),
    path(
        "conversations/<str:public_id>/handback",
        ConversationHandBackApi.as_view(),
        name="api-conversation-handback",
    ),
    path(
        "conversations/<str:public_id>/notes",
        ConversationNotesApi.as_view(),
        name="api-conversation-notes",
    ),
]
