from django.urls import path

from apps.api.routes import resource_routes
from apps.simulations.apis import (
    CaseRunListApi,
    SimCaseDetailApi,
    SimCaseListCreateApi,
    SimulationRunDetailApi,
    SimulationRunEstimateApi,
    SimulationRunListCreateApi,
    SimulationRunStopApi,
)

urlpatterns = [
    *resource_routes(
        "cases", "api-simcase", list_view=SimCaseListCreateApi, detail_view=SimCaseDetailApi
    ),
    path("runs/estimate", SimulationRunEstimateApi.as_view(), name="api-simrun-estimate"),
    *resource_routes(
        "runs",
        "api-simrun",
        list_view=SimulationRunListCreateApi,
        detail_view=SimulationRunDetailApi,
        actions={"stop": SimulationRunStopApi, "cases/": CaseRunListApi},
    ),
]
