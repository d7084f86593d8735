"""/console/ — the staff console (session login)."""

from django.urls import include, path

from apps.console import approvals, inbox, outcomes, profile, reply_templates, views

urlpatterns = [
    # The entry point is the inbox of every conversation (the name is the console's root, which
    # the MFA and staff middleware protect by prefix); the escalation queue is one of its
    # filters and keeps its own page.
    path("", inbox.inbox, name="console-queue"),
    path("inbox.json", inbox.inbox_poll, name="console-inbox-poll"),
    path("escalations/", views.queue, name="console-escalations"),
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
        "conversations/<str:public_id>/attachments/<str:attachment_id>",
        views.conversation_attachment,
        name="console-conversation-attachment",
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
    # The inbox's actions on one conversation (apps/console/inbox.py).
    path(
        "conversations/<str:public_id>/takeover",
        inbox.conversation_takeover_view,
        name="console-conversation-takeover",
    ),
    path(
        "conversations/<str:public_id>/assign",
        inbox.conversation_assign_view,
        name="console-conversation-assign",
    ),
    path(
        "conversations/<str:public_id>/handback",
        inbox.conversation_handback_view,
        name="console-conversation-handback",
    ),
    path(
        "conversations/<str:public_id>/note",
        inbox.conversation_note_view,
        name="console-conversation-note",
    ),
]
