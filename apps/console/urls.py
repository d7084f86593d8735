"""/console/ — the staff console (session login)."""

from django.urls import include, path

from apps.console import outcomes, profile, views

urlpatterns = [
    path("", views.queue, name="console-queue"),
    path("playground/", include("apps.playground.urls")),
    path("queue.json", views.queue_poll, name="console-queue-poll"),
    path("profile/", profile.profile, name="console-profile"),
    # Outcomes, links and notifications
    path("outcomes/", outcomes.outcomes_page, name="console-outcomes"),
    path("events", views.queue_events, name="console-queue-events"),
    path(
        "conversations/<str:public_id>/",
        views.conversation_page,
        name="console-conversation",
    ),
    path(
        "conversations/<str:public_id>/poll",
        views.conversation_poll,
        name="console-conversation-poll",
    ),
    path(
        "conversations/<str:public_id>/events",
        views.conversation_events,
        name="console-conversation-events",
    ),
    path(
        "conversations/<str:public_id>/reply",
        views.conversation_reply,
        name="console-conversation-reply",
    ),
    path(
        "conversations/<str:public_id>/resolve",
        views.conversation_resolve,
        name="console-conversation-resolve",
    ),
]
