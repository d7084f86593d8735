"""/console/ — the staff console (session login)."""

from django.urls import include, path

from apps.conversations import console_views

urlpatterns = [
    path("", console_views.queue, name="console-queue"),
    path("playground/", include("apps.playground.urls")),
    path("queue.json", console_views.queue_poll, name="console-queue-poll"),
    path("events", console_views.queue_events, name="console-queue-events"),
    path(
        "conversations/<str:public_id>/",
        console_views.conversation_page,
        name="console-conversation",
    ),
    path(
        "conversations/<str:public_id>/poll",
        console_views.conversation_poll,
        name="console-conversation-poll",
    ),
    path(
        "conversations/<str:public_id>/events",
        console_views.conversation_events,
        name="console-conversation-events",
    ),
    path(
        "conversations/<str:public_id>/reply",
        console_views.conversation_reply,
        name="console-conversation-reply",
    ),
    path(
        "conversations/<str:public_id>/resolve",
        console_views.conversation_resolve,
        name="console-conversation-resolve",
    ),
]
