"""/api/v1/reply-templates/ (included by config/api_urls.py)."""

from django.urls import path

from apps.escalations.template_apis import ReplyTemplateDetailApi, ReplyTemplateListApi

urlpatterns = [
    path("reply-templates/", ReplyTemplateListApi.as_view(), name="api-reply-template-list"),
    path(
        "reply-templates/<str:template_id>/",
        ReplyTemplateDetailApi.as_view(),
        name="api-reply-template-detail",
    ),
]
