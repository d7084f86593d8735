from django.urls import path

from apps.api.routes import resource_routes
from apps.privacy.apis import PrivacyRequestDetailApi, PrivacyRequestListCreateApi

urlpatterns = [
    path("requests/", PrivacyRequestListCreateApi.as_view(), name="api-privacy-requests"),
    *resource_routes(
        "requests",
        "api-privacy-request",
        id_name="request_id",
        detail_view=PrivacyRequestDetailApi,
    ),
]
