"""/api/v1/ — each app contributes its own routes."""

from django.urls import include, path

urlpatterns = [
    path("", include("apps.clients.urls")),
]
