"""A staff member's time zone and language: set on the console profile page, active on the
admin and console pages, never on the widget."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role
from apps.conversations.models import Conversation
from apps.conversations.services import conversation_create

pytestmark = pytest.mark.django_db

STARTED = dt.datetime(2026, 3, 2, 9, 14, tzinfo=dt.UTC)


def _conversation(client) -> Conversation:
    conversation, _ = conversation_create(client=client)
    Conversation.objects.for_client(client).filter(pk=conversation.pk).update(created_at=STARTED)
    return conversation


def test_the_console_shows_times_in_the_staff_members_zone(browser_for, client_a):
    agent = browser_for(Role.AGENT)
    conversation = _conversation(client_a)
    url = reverse("console-conversation", args=[conversation.public_id])
    assert "2026-03-02 09:14" in agent.get(url).content.decode()  # UTC by default

    user = agent.staff_user
    user.time_zone = "Asia/Jerusalem"  # UTC+2 in March
    user.save(update_fields=["time_zone"])
    page = agent.get(url).content.decode()
    assert "2026-03-02 11:14" in page and "2026-03-02 09:14" not in page
    assert timezone.get_current_timezone_name() == "UTC"  # put back after the request


def test_the_profile_page_sets_zone_and_language(browser_for):
    agent = browser_for(Role.AGENT)
    response = agent.post(
        reverse("console-profile"), {"time_zone": "Europe/Madrid", "language": "es"}
    )
    assert response.status_code == 302
    user = agent.staff_user
    user.refresh_from_db()
    assert (user.time_zone, user.language) == ("Europe/Madrid", "es")
    page = agent.get(reverse("console-profile"))
    assert page["Content-Language"] == "es"
    assert "(Europe/Madrid)" in page.content.decode()


def test_an_unknown_zone_is_refused_naming_the_field(browser_for):
    agent = browser_for(Role.AGENT)
    response = agent.post(reverse("console-profile"), {"time_zone": "Mars/Olympus", "language": ""})
    assert response.status_code == 200
    assert "time_zone" in response.context["form"].errors
    agent.staff_user.refresh_from_db()
    assert agent.staff_user.time_zone == ""


def test_the_profile_needs_a_signed_in_user(client):
    response = client.get(reverse("console-profile"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_admin_uses_the_staff_language(browser_for, client_a):
    agent = browser_for(Role.ADMIN)
    user = agent.staff_user
    user.is_staff, user.language = True, "es"
    user.save(update_fields=["is_staff", "language"])
    response = agent.get(reverse("admin:index"))
    assert response["Content-Language"] == "es"


def test_the_widget_never_takes_the_staff_members_language(browser_for, client_a):
    # A staff member's browser that opens the widget (same site) gets the customer's language.
    agent = browser_for(Role.AGENT)
    user = agent.staff_user
    user.language, user.time_zone = "he", "Asia/Jerusalem"
    user.save(update_fields=["language", "time_zone"])
    response = agent.post(
        "/api/v1/widget/conversations",
        {},
        content_type="application/json",
        headers={"X-Widget-Key": client_a.widget_key, "Origin": client_a.allowed_origins[0]},
    )
    assert response.status_code == 201
    assert response.get("Content-Language") != "he"
    from apps.accounts.middleware import staff_prefixes

    assert not any(p.startswith(staff_prefixes()) for p in ("/api/v1/widget/", "/widget/"))
