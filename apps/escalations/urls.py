from apps.api.routes import resource_routes
from apps.escalations.apis import (
    ConversationAssignApi,
    ConversationHandBackApi,
    ConversationNotesApi,
    ConversationTakeoverApi,
    EscalationListApi,
    EscalationResolveApi,
)

urlpatterns = [
    *resource_routes(
        "escalations",
        "api-escalation",
        id_name="escalation_id",
        list_view=EscalationListApi,
        actions={"resolve": EscalationResolveApi},
    ),
    *resource_routes(
        "conversations",
        "api-conversation",
        actions={
            "takeover": ConversationTakeoverApi,
            "assign": ConversationAssignApi,
            "handback": ConversationHandBackApi,
            "notes": ConversationNotesApi,
        },
    ),
]
