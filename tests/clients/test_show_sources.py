"""The client's `show_sources` switch (sources under a knowledge answer, docs/widget.md): on by
default, set in the tenant file's `widget` section and exported back, and in the client admin."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from apps.clients.models import Client
from apps.provisioning.services import client_export, tenant_import
from tests.clients.helpers import one_shop_tenant
from tests.factories import ClientFactory, PlanFactory, UserFactory
from tests.support.admin_forms import client_form

pytestmark = pytest.mark.django_db


def tenant(**widget: Any) -> dict[str, Any]:
    widget = {"allowed_origins": ["https://shop.example"], **widget}
    return one_shop_tenant("basic", slug="shop", name="Shop", widget=widget)


def test_the_tenant_file_sets_show_sources_and_the_export_keeps_it():
    tenant_import(data=tenant())
    shop = Client.objects.get(slug="shop")
    assert shop.show_sources is True  # on unless the file says otherwise
    assert client_export(client=shop)["widget"]["show_sources"] is True

    tenant_import(data=tenant(show_sources=False))
    shop.refresh_from_db()
    assert shop.show_sources is False
    exported = client_export(client=shop)
    assert exported["widget"]["show_sources"] is False
    # what the export says imports back to the same setting
    tenant_import(data={"clients": [exported]})
    shop.refresh_from_db()
    assert shop.show_sources is False


def test_show_sources_must_be_a_boolean():
    from apps.core.exceptions import ApplicationError

    with pytest.raises(ApplicationError, match="show_sources"):
        tenant_import(data=tenant(show_sources="sometimes"))
    assert not Client.objects.filter(slug="shop").exists()


def test_the_client_admin_switches_sources_off(client):
    client.force_login(UserFactory(is_superuser=True))
    shop = ClientFactory(plan=PlanFactory())
    url = reverse("admin:clients_client_change", args=[shop.pk])
    page = client.get(url).content.decode()
    assert 'name="show_sources"' in page and "checked" in re.search(
        r"<input[^>]*name=\"show_sources\"[^>]*>", page
    ).group(0)
    # show_sources left unticked
    data = client_form(page, shop, business_info="{}", playground_max_iterations="")
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    shop.refresh_from_db()
    assert shop.show_sources is False
