from django.urls import path

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
    path("cases/", SimCaseListCreateApi.as_view(), name="api-simcase-list"),
    path("cases/<str:public_id>/", SimCaseDetailApi.as_view(), name="api-simcase-detail"),
    path("runs/", SimulationRunListCreateApi.as_view(), name="api-simrun-list"),
    path("runs/estimate", SimulationRunEstimateApi.as_view(), name="api-simrun-estimate"),
    path("runs/<str:public_id>/", SimulationRunDetailApi.as_view(), name="api-simrun-detail"),
    path("runs/<str:public_id>/stop", SimulationRunStopApi.as_view(), name="api-simrun-stop"),
    path("runs/<str:public_id>/cases/", CaseRunListApi.as_view(), name="api-simrun-cases"),
]
