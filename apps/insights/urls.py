"""/api/v1/flags/ and /api/v1/teach/ (included by config/api_urls.py)."""

from django.urls import path

from apps.insights.apis import FlagDetailApi, FlagListApi, StaffReplyTeachApi

urlpatterns = [
    path("flags/", FlagListApi.as_view(), name="api-flag-list"),
    path("flags/<str:flag_id>/", FlagDetailApi.as_view(), name="api-flag-detail"),
    path("teach/staff-replies", StaffReplyTeachApi.as_view(), name="api-teach-staff-reply"),
]
