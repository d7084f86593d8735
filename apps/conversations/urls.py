from django.urls import path

from apps.conversations.apis import (
    ConversationDetailApi,
    ConversationListApi,
    ConversationMessageCreateApi,
)

urlpatterns = [
    path("conversations/", ConversationListApi.as_view(), name="api-conversation-list"),
    path(
        "conversations/<str:public_id>/",
        ConversationDetailApi.as_view(),
        name="api-conversation-detail",
    ),
    path(
        "conversations/<str:public_id>/messages",
        ConversationMessageCreateApi.as_view(),
        name="api-conversation-messages",
    ),
]
