"""The console's outcomes page and the admin's outcomes by client: roles and tenancy."""

from __future__ import annotations

import pytest
from django.test import Client as DjangoClient
from django.urls import reverse

from apps.accounts.models import Role
from tests.factories import MembershipFactory, UserFactory
from tests.outcomes.conftest import make_conversation

pytestmark = pytest.mark.django_db

PERIOD = "&start=2026-03-10&end=2026-03-10"


def console_url(slug: str) -> str:
    return reverse("console-outcomes") + f"?client={slug}" + PERIOD


@pytest.fixture
def rated(client_a, client_b):
    make_conversation(client_a, score=5, cost="0.5", billed="1.5")
    make_conversation(client_a, score=3)
    make_conversation(client_b, score=1)


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT, Role.ADMIN])
def test_every_member_sees_the_outcomes_money_only_admins(browser_for, client_a, rated, role):
    page = browser_for(role).get(console_url(client_a.slug))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-conversations="2"' in html
    assert 'data-ratings="2"' in html
    assert 'data-metric="csat"' in html
    assert "50.0 %" in html  # CSAT: one of two ratings is 4 or 5
    assert ('data-metric="cost_per_resolved"' in html) is (role == Role.ADMIN)
    assert "/api/v1/outcomes/?client=acme" in html  # the CSV link


def test_another_clients_outcomes_are_404(browser_for, client_a, client_b, rated):
    browser = browser_for(Role.ADMIN)  # an admin of client A only
    assert browser.get(console_url(client_b.slug)).status_code == 404


def test_the_console_nav_links_to_outcomes_and_the_admin(browser_for, client_a):
    html = browser_for(Role.VIEWER).get(reverse("console-queue") + "?client=acme").content
    assert reverse("console-outcomes").encode() in html
    assert b'href="/admin/"' in html


def test_a_bad_period_falls_back_and_says_why(browser_for, client_a):
    page = browser_for(Role.VIEWER).get(
        reverse("console-outcomes") + "?client=acme&start=2026-03-12&end=2026-03-10"
    )
    assert page.status_code == 200
    assert 'role="alert"' in page.content.decode()


def staff_with_view_perm(client, role: str) -> DjangoClient:
    from django.contrib.auth.models import Permission

    user = UserFactory()
    user.user_permissions.add(Permission.objects.get(codename="view_clientoutcomes"))
    MembershipFactory(client=client, user=user, role=role)
    browser = DjangoClient()
    browser.force_login(user)
    return browser


def test_admin_outcomes_page_for_members_and_404_for_others(client_a, client_b, rated):
    url_a = reverse("admin:outcomes_client_outcomes", args=[client_a.pk]) + "?" + PERIOD[1:]
    url_b = reverse("admin:outcomes_client_outcomes", args=[client_b.pk])
    viewer = staff_with_view_perm(client_a, Role.VIEWER)
    page = viewer.get(url_a)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Outcomes — Acme" in html
    assert "Cost / billed per resolved" not in html  # money: admins only
    assert viewer.get(url_b).status_code == 404
    admin_page = staff_with_view_perm(client_a, Role.ADMIN).get(url_a).content.decode()
    assert "Cost / billed per resolved" in admin_page
    assert "0.75000000" in admin_page  # billed per resolved: 1.5 over 2 resolved
    listing = viewer.get(reverse("admin:outcomes_clientoutcomes_changelist")).content.decode()
    assert "Acme" in listing and "Globex" not in listing


def test_the_conversation_page_shows_the_customers_rating_as_text(browser_for, client_a):
    rated = make_conversation(client_a, score=2)
    from apps.conversations.models import ConversationRating

    ConversationRating.objects.for_client(client_a).filter(conversation=rated).update(
        comment="<b>Too slow</b>"
    )
    unrated = make_conversation(client_a)
    viewer = browser_for(Role.VIEWER)
    page = viewer.get(
        reverse("console-conversation", args=[rated.public_id]) + "?client=acme"
    ).content.decode()
    assert "data-rating" in page and "2/5" in page
    assert "&lt;b&gt;Too slow&lt;/b&gt;" in page  # the customer's words are data, escaped
    other = viewer.get(reverse("console-conversation", args=[unrated.public_id]) + "?client=acme")
    assert "data-rating" not in other.content.decode()
