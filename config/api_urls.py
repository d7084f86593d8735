"""/api/v1/ — each app contributes its own routes."""

from django.urls import include, path

urlpatterns = [
    path("", include("apps.clients.urls")),
    path("", include("apps.accounts.urls")),
    path("widget/", include("apps.widget.urls")),
    path("", include("apps.conversations.urls")),
    path("", include("apps.escalations.urls")),
    path("", include("apps.tools.urls")),
    path("", include("apps.approvals.urls")),
    path("", include("apps.notes.urls")),
    path("billing/", include("apps.billing.urls")),
    path("outcomes/", include("apps.outcomes.urls")),
    path("simulations/", include("apps.simulations.urls")),
    path("knowledge/", include("apps.knowledge.urls")),
    # Reply templates, flags on the assistant's answers and teaching from them.
    path("", include("apps.escalations.template_urls")),
    path("", include("apps.insights.urls")),
    path("", include("apps.simulations.flag_urls")),
    path("privacy/", include("apps.privacy.urls")),
    path("events/", include("apps.events.urls")),
    path("", include("apps.mail.api_urls")),
]
