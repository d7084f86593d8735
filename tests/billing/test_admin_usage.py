"""The admin usage page: a server-rendered SVG of daily cost by mode and the critique rate;
staff see only the clients they are members of."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role
from apps.billing import periods
from tests.billing.conftest import Call, make_turn
from tests.factories import ClientFactory, MembershipFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(prices):
    client = ClientFactory(slug="acme", name="Acme", plan=PlanFactory(slug="pro-plan"))
    today = periods.today()
    make_turn(client, day=today, hour=0, calls=[Call("assess", 500, 50)])
    make_turn(
        client,
        day=today,
        hour=0,
        critique=True,
        calls=[Call("assess", 500, 50), Call("critique", 300, 30)],
    )
    make_turn(client, day=today, hour=0, mode="standard", calls=[Call("respond", 2000, 40)])
    make_turn(client, day=today, hour=0, calls=[Call("assess", 400, 40)])
    return client


@pytest.fixture
def globex(prices):
    return ClientFactory(slug="globex", name="Globex", plan=PlanFactory(slug="g-plan"))


def url(client) -> str:
    return reverse("admin:billing_client_usage", args=[client.pk])


def staff_of(client, *codenames: str):
    # Usage and billing are for a client's admins and owners (the billing API's rule).
    member = MembershipFactory(client=client, role=Role.ADMIN)
    member.user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return member.user


def test_superuser_sees_the_chart_and_the_critique_rate(client, acme) -> None:
    client.force_login(UserFactory(is_superuser=True))
    response = client.get(url(acme))
    assert response.status_code == 200
    page = response.content.decode()
    svg = re.search(r"<svg xmlns=\"http://www.w3.org/2000/svg\" .*?</svg>", page, re.DOTALL)
    assert svg is not None
    chart = svg.group(0)
    assert 'role="img"' in chart
    assert "Billed cost (USD)" in chart and ">Day<" in chart  # axis labels
    assert ">adaptive<" in chart and ">standard<" in chart  # legend
    assert chart.count("<rect") >= 2 + 2  # a segment per mode today + legend swatches
    assert f"{periods.today().isoformat()} · adaptive" in chart  # segment tooltip
    # 1 of the 4 turns triggered critique
    assert re.search(r'id="critique-rate">\s*25\.0%', page)
    assert "<script" not in chart and "cdn" not in page.lower()


def test_bad_dates_show_an_error_and_the_default_range(client, acme) -> None:
    client.force_login(UserFactory(is_superuser=True))
    page = client.get(url(acme), {"start": "2026-02-30"}).content.decode()
    assert "start:" in page and "Date has wrong format" in page
    assert "<svg" in page


def test_staff_see_only_their_own_clients(client, acme, globex) -> None:
    client.force_login(staff_of(acme, "view_clientusage"))
    assert client.get(url(acme)).status_code == 200
    assert client.get(url(globex)).status_code == 404  # exactly like a missing client
    listing = client.get(reverse("admin:billing_clientusage_changelist")).content.decode()
    assert "Acme" in listing and "Globex" not in listing


def test_viewing_usage_records_is_enough_to_see_the_page(client, acme) -> None:
    client.force_login(staff_of(acme, "view_usagerecord"))
    assert client.get(url(acme)).status_code == 200
    records = client.get(reverse("admin:billing_usagerecord_changelist")).content.decode()
    assert url(acme) in records  # each record links to its client's usage page


def test_staff_without_permission_cannot_open_it(client, acme) -> None:
    client.force_login(staff_of(acme))
    assert client.get(url(acme)).status_code == 404


def test_the_change_view_redirects_to_the_usage_page(client, acme) -> None:
    client.force_login(UserFactory(is_superuser=True))
    response = client.get(reverse("admin:billing_clientusage_change", args=[acme.pk]))
    assert response.status_code == 302 and response["Location"] == url(acme)


def test_a_period_that_cost_nothing_charts_tokens_and_says_so(client) -> None:
    """The offline demo model (no price): every cost is $0, so a cost chart would be empty."""
    free = ClientFactory(slug="free", name="Free Shop", plan=PlanFactory(slug="free-plan"))
    today = periods.today()
    make_turn(free, day=today, calls=[Call("assess", 700, 60, model="offline-demo")])
    make_turn(free, day=today, mode="standard", calls=[Call("respond", 1200, 80, model="x")])
    client.force_login(UserFactory(is_superuser=True))
    page = client.get(url(free)).content.decode()
    chart = re.search(r"<svg xmlns=\"http://www.w3.org/2000/svg\" .*?</svg>", page, re.DOTALL)
    assert chart is not None
    svg = chart.group(0)
    assert "Tokens per day by mode" in svg and ">Tokens<" in svg
    assert "Billed cost" not in svg
    assert f"{today.isoformat()} · adaptive: 760 tokens" in svg
    assert f"{today.isoformat()} · standard: 1,280 tokens" in svg
    assert "chart-tokens-note" in page
    assert "<strong>tokens</strong> per day instead of billed cost" in page


def test_a_period_with_cost_charts_cost_without_the_note(client, acme) -> None:
    client.force_login(UserFactory(is_superuser=True))
    page = client.get(url(acme)).content.decode()
    assert "Billed cost per day by mode" in page
    assert "chart-tokens-note" not in page


def test_a_period_without_usage_charts_an_empty_cost_chart(client, globex) -> None:
    client.force_login(UserFactory(is_superuser=True))
    page = client.get(url(globex)).content.decode()
    assert "Billed cost per day by mode" in page and "chart-tokens-note" not in page
    assert "No usage in this period." in page
