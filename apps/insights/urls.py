"""/api/v1/flags/ and /api/v1/teach/ (included by config/api_urls.py)."""

from django.urls import path

from apps.api.routes import resource_routes
from apps.insights.apis import FlagDetailApi, FlagListApi, StaffReplyTeachApi

urlpatterns = [
    *resource_routes(
        "flags", "api-flag", id_name="flag_id", list_view=FlagListApi, detail_view=FlagDetailApi
    ),
    path("teach/staff-replies", StaffReplyTeachApi.as_view(), name="api-teach-staff-reply"),
]
