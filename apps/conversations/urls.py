from apps.api.routes import resource_routes
from apps.conversations.apis import (
    ConversationDetailApi,
    ConversationListApi,
    ConversationMessageCreateApi,
)

urlpatterns = resource_routes(
    "conversations",
    "api-conversation",
    list_view=ConversationListApi,
    detail_view=ConversationDetailApi,
    actions={"messages": ConversationMessageCreateApi},
)
