"""/console/conversations/<id>/… flag-and-teach actions (included by the console's URLconf)."""

from django.urls import path

from apps.insights import views

urlpatterns = [
    path(
        "conversations/<str:public_id>/flags.json",
        views.conversation_flags,
        name="console-conversation-flags",
    ),
    path(
        "conversations/<str:public_id>/messages/<str:message_id>/flag",
        views.message_flag_view,
        name="console-message-flag",
    ),
    path(
        "conversations/<str:public_id>/messages/<str:message_id>/teach",
        views.message_teach_view,
        name="console-message-teach",
    ),
]
