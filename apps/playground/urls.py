"""/console/playground/ (included by the console's URLconf)."""

from django.urls import path

from apps.api.routes import resource_routes
from apps.playground import views

urlpatterns = [
    path("", views.playground, name="playground"),
    path("runs", views.run_start, name="playground-start"),
    *resource_routes(
        "runs",
        "playground-run",
        detail_view=views.run_page,
        detail_name="playground-run",
        actions={"events": views.run_events, "stop": views.run_stop},
    ),
]
