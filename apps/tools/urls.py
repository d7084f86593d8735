from django.urls import path

from apps.tools.apis import ToolDetailApi, ToolExecutionListApi, ToolListApi

urlpatterns = [
    path("tool-executions/", ToolExecutionListApi.as_view(), name="api-tool-execution-list"),
    path("tools/", ToolListApi.as_view(), name="api-tool-list"),
    path("tools/<str:name>/", ToolDetailApi.as_view(), name="api-tool-detail"),
]
