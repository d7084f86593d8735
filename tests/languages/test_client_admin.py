"""The client's default and allowed languages in the admin: shipped codes only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import ClientFactory, PlanFactory
from tests.support.admin_forms import client_form

pytestmark = pytest.mark.django_db


def _form(admin_client, shop, **fields):
    url = reverse("admin:clients_client_change", args=[shop.pk])
    page = admin_client.get(url).content.decode()
    assert "Allowed languages" in page and "Default language" in page
    data = client_form(page, shop, business_info="{}", playground_max_iterations="", **fields)
    return admin_client.post(url, data)


def test_languages_are_set_in_the_admin(admin_client):
    shop = ClientFactory(plan=PlanFactory())
    response = _form(admin_client, shop, language="es", languages=["he", "en"])
    assert response.status_code == 302, response.content.decode()[:3000]
    shop.refresh_from_db()
    assert shop.language == "es"
    assert shop.languages == ["es", "en", "he"]  # the default is always allowed


def test_an_unshipped_language_is_refused(admin_client):
    shop = ClientFactory(plan=PlanFactory())
    response = _form(admin_client, shop, language="xx", languages=["en", "zz"])
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert "language" in form.errors and "languages" in form.errors
    shop.refresh_from_db()
    assert shop.language == "en"
