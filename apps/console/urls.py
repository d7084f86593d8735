"""/console/ — the staff console (session login)."""

from django.urls import include, path

from apps.api.routes import resource_routes
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
    *resource_routes(
        "conversations",
        "console-conversation",
        detail_view=views.conversation_page,
        detail_name="console-conversation",
        actions={
            "poll": views.conversation_poll,
            "events": views.conversation_events,
            "reply": views.conversation_reply,
            "resolve": views.conversation_resolve,
        },
    ),
    path(
        "conversations/<str:public_id>/attachments/<str:attachment_id>",
        views.conversation_attachment,
        name="console-conversation-attachment",
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
    *resource_routes(
        "approvals",
        "console-approval",
        id_name="approval_id",
        actions={
            "approve": approvals.approval_approve_view,
            "deny": approvals.approval_deny_view,
        },
    ),
    # The inbox's actions on one conversation (apps/console/inbox.py).
    *resource_routes(
        "conversations",
        "console-conversation",
        actions={
            "takeover": inbox.conversation_takeover_view,
            "assign": inbox.conversation_assign_view,
            "handback": inbox.conversation_handback_view,
            "note": inbox.conversation_note_view,
        },
    ),
]
