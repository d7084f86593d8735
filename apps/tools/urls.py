from django.urls import path

from apps.tools.apis import (
    McpServerDetailApi,
    McpServerListApi,
    McpServerSyncApi,
    ToolDetailApi,
    ToolExecutionListApi,
    ToolListApi,
)

urlpatterns = [
    path("tool-executions/", ToolExecutionListApi.as_view(), name="api-tool-execution-list"),
    path("tools/", ToolListApi.as_view(), name="api-tool-list"),
    path("tools/<str:name>/", ToolDetailApi.as_view(), name="api-tool-detail"),
    path("mcp-servers/", McpServerListApi.as_view(), name="api-mcp-server-list"),
    path(
        "mcp-servers/<str:server_name>/",
        McpServerDetailApi.as_view(),
        name="api-mcp-server-detail",
    ),
    path(
        "mcp-servers/<str:server_name>/sync",
        McpServerSyncApi.as_view(),
        name="api-mcp-server-sync",
    ),
]
