"""/console/flags/<id>/simulation-case (included by the console's URLconf)."""

from django.urls import path

from apps.simulations import views

urlpatterns = [
    path(
        "flags/<str:flag_id>/simulation-case",
        views.flag_simulation_case,
        name="console-flag-simulation-case",
    ),
]
