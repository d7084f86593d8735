"""/api/v1/approvals/ (included by config/api_urls.py)."""

from django.urls import path

from apps.approvals.apis import (
    ApprovalApproveApi,
    ApprovalDenyApi,
    ApprovalDetailApi,
    ApprovalListApi,
)

urlpatterns = [
    path("approvals/", ApprovalListApi.as_view(), name="api-approval-list"),
    path("approvals/<str:approval_id>/", ApprovalDetailApi.as_view(), name="api-approval-detail"),
    path(
        "approvals/<str:approval_id>/approve",
        ApprovalApproveApi.as_view(),
        name="api-approval-approve",
    ),
    path("approvals/<str:approval_id>/deny", ApprovalDenyApi.as_view(), name="api-approval-deny"),
]
