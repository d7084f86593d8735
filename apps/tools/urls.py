from apps.api.routes import resource_routes
from apps.tools.apis import (
    McpServerDetailApi,
    McpServerListApi,
    McpServerSyncApi,
    ToolDetailApi,
    ToolExecutionListApi,
    ToolListApi,
)

urlpatterns = [
    *resource_routes("tool-executions", "api-tool-execution", list_view=ToolExecutionListApi),
    *resource_routes(
        "tools", "api-tool", id_name="name", list_view=ToolListApi, detail_view=ToolDetailApi
    ),
    *resource_routes(
        "mcp-servers",
        "api-mcp-server",
        id_name="server_name",
        list_view=McpServerListApi,
        detail_view=McpServerDetailApi,
        actions={"sync": McpServerSyncApi},
    ),
]
