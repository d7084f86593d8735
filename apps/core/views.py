from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from apps.clients.models import Client


def home(request: HttpRequest) -> HttpResponse:
    """The demo landing page: the demo shop and where to go next."""
    client = Client.objects.filter(is_active=True).select_related("plan").order_by("pk").first()
    return render(request, "home.html", {"client": client})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})
