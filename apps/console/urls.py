"""/console/ — the staff console (session login)."""

from django.urls import include, path

from apps.console import approvals, outcomes, profile, reply_templates, views

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
    # Reply templates, flags on the assistant's answers and teaching from them.
    path(
        "conversations/<str:public_id>/reply-templates.json",
        reply_templates.conversation_templates,
        name="console-reply-templates",
    ),
    path("", include("apps.insights.console_urls")),
    path("", include("apps.simulations.console_urls")),
    # tool calls held for a teammate's approval (apps/console/approvals.py)
    path("approvals/", approvals.approvals_page, name="console-approvals"),
    path(
        "approvals/<str:approval_id>/approve",
        approvals.approval_approve_view,
        name="console-approval-approve",
    ),
    path(
        "approvals/<str:approval_id>/deny",
        approvals.approval_deny_view,
        name="console-approval-deny",
    ),
]
