from django.urls import path

from apps.privacy.apis import PrivacyRequestDetailApi, PrivacyRequestListCreateApi

urlpatterns = [
    path("requests/", PrivacyRequestListCreateApi.as_view(), name="api-privacy-requests"),
    path(
        "requests/<str:request_id>/",
        PrivacyRequestDetailApi.as_view(),
        name="api-privacy-request-detail",
    ),
]
