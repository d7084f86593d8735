from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static

from apps.clients.identity import user_hash
from apps.clients.models import Client
from apps.core.tenant_sql import sql_rows

DEMO_PRODUCTS = [
    {
        "name": "Ridgeline 2P Tent",
        "blurb": "Freestanding three-season tent, 1.6 kg packed.",
        "price": "349.00",
        "tone": "tent",
    },
    {
        "name": "Switchback 45 L Pack",
        "blurb": "Ventilated frame, hip-belt pockets, rain cover included.",
        "price": "189.00",
        "tone": "pack",
    },
    {
        "name": "Granite Trail Runner",
        "blurb": "Grippy lugs and a rock plate for technical trails.",
        "price": "139.00",
        "tone": "shoe",
    },
    {
        "name": "Trailhead Merino Base Layer",
        "blurb": "150 g/m² merino wool, odour-resistant, made for layering.",
        "price": "79.00",
        "tone": "layer",
    },
]


# The demo shop's signed-in customer (docs/widget.md "Identity verification").
DEMO_CUSTOMER_ID = "demo-customer"


def home(request: HttpRequest) -> HttpResponse:
    """`/`: a plain landing page with the staff sign-in links, which shows no tenant data. Only
    the demo/local settings (`DEMO_PAGE`) make it the demo instead: a pretend shop of the first
    active client with its chat widget embedded — for a signed-in demo customer whose id the
    page signs here, server-side, with the client's identity secret, as a real shop's backend
    would (`?as=anonymous`: an anonymous visitor)."""
    if not settings.DEMO_PAGE:
        return render(request, "landing.html")
    client = Client.objects.filter(is_active=True).select_related("plan").order_by("pk").first()
    anonymous = request.GET.get("as") == "anonymous"
    signed = None
    if client is not None and client.identity_secret and not anonymous:
        signed = {
            "customer_id": DEMO_CUSTOMER_ID,
            "user_hash": user_hash(client.identity_secret, DEMO_CUSTOMER_ID),
        }
    return render(
        request,
        "home.html",
        {"client": client, "products": DEMO_PRODUCTS, "signed": signed, "anonymous": anonymous},
    )


def healthz(request: HttpRequest) -> JsonResponse:
    sql_rows("core.healthz", "SELECT 1", client_id=None)
    return JsonResponse({"ok": True})


def favicon(request: HttpRequest) -> HttpResponse:
    """`/favicon.ico`: browsers ask for it on every site whatever a page links (the API docs, a
    JSON response, an error page), so it answers with the static icon instead of a 404."""
    return redirect(static("favicon.ico"))
