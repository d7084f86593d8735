"""The favicon: a static SVG (and ICO) linked from every base template, and `/favicon.ico`
answering, so no page makes the browser log a 404."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client as DjangoClient

from tests.api.conftest import make_tenant_data
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ICON_LINKS = re.compile(r'<link rel="icon" href="(/static/favicon\.(?:svg|ico))"')


def icon_links(response) -> list[str]:
    assert response.status_code == 200, response
    return ICON_LINKS.findall(response.content.decode())


def test_favicon_ico_answers_with_the_static_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"] == "/static/favicon.ico"
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert b"".join(icon.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an ICO file


def test_both_icon_files_exist():
    svg = finders.find("favicon.svg")
    assert svg and open(svg).read().startswith("<svg")  # noqa: SIM115
    assert finders.find("favicon.ico")


@pytest.mark.parametrize("staff_page", ["/admin/", "/console/", "/accounts/login/"])
def test_every_staff_page_links_the_icon(client, client_a, staff_page):
    if staff_page != "/accounts/login/":
        client.force_login(UserFactory(is_superuser=True))
    assert icon_links(client.get(staff_page)) == ["/static/favicon.svg", "/static/favicon.ico"]


def test_the_public_pages_link_the_icon(client, client_a, settings):
    assert icon_links(client.get("/")) == ["/static/favicon.svg", "/static/favicon.ico"]
    settings.DEMO_PAGE = True
    assert icon_links(client.get("/")) == ["/static/favicon.svg", "/static/favicon.ico"]
    frame = DjangoClient().get("/widget/frame/", {"key": client_a.widget_key})
    assert icon_links(frame) == ["/static/favicon.svg", "/static/favicon.ico"]


def test_the_admins_usage_and_debug_pages_link_it_too(client, client_a):
    data = make_tenant_data(client_a)
    client.force_login(UserFactory(is_superuser=True))
    debug = client.get(f"/admin/conversations/conversation/{data.conversation.pk}/change/")
    assert icon_links(debug) == ["/static/favicon.svg", "/static/favicon.ico"]
