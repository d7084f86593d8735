"""Business hours as a client setting: in the tenant file (validated, each error naming its
path; left out = kept, {} = cleared; exported again) and in the admin (validated the same)."""

from __future__ import annotations

import copy
import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import client_export, tenant_import
from tests.conftest import DEMO_TENANT
from tests.factories import ClientFactory, PlanFactory
from tests.support.admin_forms import client_form

pytestmark = pytest.mark.django_db

HOURS = {
    "time_zone": "Europe/Madrid",
    "weekly": {"mon": ["09:00-14:00", "16:00-19:00"], "sat": ["10:00-13:00"]},
    "holidays": ["2026-12-25"],
}


def small_file(**client: Any) -> dict[str, Any]:
    return {
        "plans": [{"slug": "basic", "name": "Basic"}],
        "clients": [{"slug": "tienda", "name": "Tienda", "plan": "basic", **client}],
    }


def test_the_demo_shop_ships_business_hours():
    tenant_import(data=load_tenant_file(DEMO_TENANT))
    hours = Client.objects.get(slug="trailhead").business_hours
    assert hours["time_zone"] == "America/Denver"
    assert hours["weekly"]["mon"] == ["08:00-18:00"]
    assert "sun" not in hours["weekly"]  # closed on Sunday, as its contact hours say


def test_imported_kept_when_left_out_cleared_with_empty_and_exported():
    tenant_import(data=small_file(business_hours=HOURS))
    client = Client.objects.get(slug="tienda")
    assert client.business_hours == HOURS

    tenant_import(data=small_file())  # left out: what the admin set stays
    client.refresh_from_db()
    assert client.business_hours == HOURS
    exported = client_export(client=client)
    assert exported["business_hours"] == HOURS
    tenant_import(data={"clients": [exported]})  # the export imports back unchanged
    client.refresh_from_db()
    assert client.business_hours == HOURS

    tenant_import(data=small_file(business_hours={}))
    client.refresh_from_db()
    assert client.business_hours == {}
    assert "business_hours" not in client_export(client=client)


@pytest.mark.parametrize(
    ("hours", "path", "words"),
    [
        ({**HOURS, "time_zone": "Madrid"}, "business_hours.time_zone", "IANA"),
        ({**HOURS, "time_zone": "CEST+2"}, "business_hours.time_zone", "IANA"),
        ({**HOURS, "weekly": {"mon": ["9-14"]}}, "business_hours.weekly.mon[0]", "HH:MM-HH:MM"),
        ({**HOURS, "weekly": {"mon": ["18:00-09:00"]}}, "business_hours.weekly.mon[0]", "ends"),
        ({**HOURS, "weekly": {"mon": ["25:00-26:00"]}}, "business_hours.weekly.mon[0]", "HH:MM"),
        (
            {**HOURS, "weekly": {"mon": ["09:00-14:00", "13:00-19:00"]}},
            "business_hours.weekly.mon",
            "overlap",
        ),
        ({**HOURS, "weekly": {"monday": ["09:00-14:00"]}}, "business_hours.weekly.monday", "mon"),
        ({**HOURS, "weekly": {}}, "business_hours.weekly", "at least one day"),
        ({**HOURS, "holidays": ["25/12/2026"]}, "business_hours.holidays[0]", "YYYY-MM-DD"),
        ({**HOURS, "holidays": ["2026-02-30"]}, "business_hours.holidays[0]", "YYYY-MM-DD"),
        ({**HOURS, "timezone": "UTC"}, "business_hours.timezone", "unknown key"),
    ],
)
def test_a_bad_business_hours_entry_names_its_path_and_changes_nothing(hours, path, words):
    with pytest.raises(ApplicationError) as caught:
        tenant_import(data=small_file(business_hours=hours))
    fields = (caught.value.extra or {})["fields"]
    assert f"clients[0].{path}" in fields, fields
    assert words in fields[f"clients[0].{path}"]
    assert f"clients[0].{path}: " in caught.value.message
    assert not Client.objects.filter(slug="tienda").exists()


def test_the_command_prints_the_path(tmp_path):
    data = copy.deepcopy(small_file(business_hours={**HOURS, "time_zone": "Nowhere/City"}))
    path = tmp_path / "tenant.json"
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match=r"clients\[0\]\.business_hours\.time_zone: not a time"):
        call_command("import_client", str(path), stdout=StringIO())


def test_the_admin_edits_and_validates_business_hours(admin_client):
    shop = ClientFactory(plan=PlanFactory())
    url = reverse("admin:clients_client_change", args=[shop.pk])
    page = admin_client.get(url)
    body = page.content.decode()
    assert 'name="business_hours"' in body
    data = client_form(
        body,
        shop,
        allowed_origins=json.dumps(shop.allowed_origins),
        business_hours=json.dumps({**HOURS, "holidays": ["tomorrow"]}),
    )
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "holidays[0]: a date is written YYYY-MM-DD" in response.content.decode()
    shop.refresh_from_db()
    assert shop.business_hours == {}

    response = admin_client.post(url, {**data, "business_hours": json.dumps(HOURS)})
    assert response.status_code == 302, response.context["adminform"].form.errors
    shop.refresh_from_db()
    assert shop.business_hours == HOURS

    # emptied: no business hours (the hand-off as before), never a failed save
    response = admin_client.post(url, {**data, "business_hours": ""})
    assert response.status_code == 302, response.context["adminform"].form.errors
    shop.refresh_from_db()
    assert shop.business_hours == {}
