"""/api/v1/approvals/ (included by config/api_urls.py)."""

from apps.api.routes import resource_routes
from apps.approvals.apis import (
    ApprovalApproveApi,
    ApprovalDenyApi,
    ApprovalDetailApi,
    ApprovalListApi,
)

urlpatterns = resource_routes(
    "approvals",
    "api-approval",
    id_name="approval_id",
    list_view=ApprovalListApi,
    detail_view=ApprovalDetailApi,
    actions={"approve": ApprovalApproveApi, "deny": ApprovalDenyApi},
)
