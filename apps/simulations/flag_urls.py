"""/api/v1/flags/<id>/simulation-case (included by config/api_urls.py)."""

from django.urls import path

from apps.simulations.flag_apis import FlagSimulationCaseApi

urlpatterns = [
    path(
        "flags/<str:flag_id>/simulation-case",
        FlagSimulationCaseApi.as_view(),
        name="api-flag-simulation-case",
    ),
]
