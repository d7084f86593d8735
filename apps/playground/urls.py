"""/console/playground/ (included by the console's URLconf)."""

from django.urls import path

from apps.playground import views

urlpatterns = [
    path("", views.playground, name="playground"),
    path("runs", views.run_start, name="playground-start"),
    path("runs/<str:public_id>/", views.run_page, name="playground-run"),
    path("runs/<str:public_id>/events", views.run_events, name="playground-run-events"),
    path("runs/<str:public_id>/stop", views.run_stop, name="playground-run-stop"),
]
