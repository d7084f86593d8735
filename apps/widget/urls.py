"""/api/v1/widget/ — the customer widget's API (docs/widget.md)."""

from django.urls import URLPattern, URLResolver, path

from apps.widget import apis

app_name = "widget"

urlpatterns: list[URLPattern | URLResolver] = [
    path("conversations", apis.WidgetConversationStartApi.as_view(), name="conversations"),
    # <str:…>, not <uuid:…>: a malformed id must answer the API's JSON 404, not Django's page.
    path(
        "conversations/<str:conversation_id>/messages",
        apis.WidgetMessagesApi.as_view(),
        name="messages",
    ),
    path(
        "conversations/<str:conversation_id>/contact",
        apis.WidgetContactApi.as_view(),
        name="contact",
    ),
    path(
        "conversations/<str:conversation_id>/rating",
        apis.WidgetRatingApi.as_view(),
        name="rating",
    ),
    path(
        "conversations/<str:conversation_id>/events",
        apis.WidgetEventsApi.as_view(),
        name="events",
    ),
]
