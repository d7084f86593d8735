"""Links between the surfaces: the hand-off e-mail opens the console conversation; the admin,
console and shop link to each other."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client as DjangoClient
from django.urls import reverse

from apps.accounts.models import Role
from apps.conversations.services import conversation_create, message_append
from apps.core.links import site_url
from apps.escalations.models import EscalationReason
from apps.escalations.services import escalation_create
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_the_handoff_email_links_straight_to_the_console_conversation(
    client_a, settings, django_capture_on_commit_callbacks
):
    settings.SITE_URL = "https://support.example.com/"
    conversation, _ = conversation_create(client=client_a)
    message_append(client=client_a, conversation=conversation, role="user", text="A human please")
    with django_capture_on_commit_callbacks(execute=True):
        escalation_create(
            client=client_a, conversation=conversation, reason=EscalationReason.CUSTOMER_REQUEST
        )
    assert len(mail.outbox) == 1
    body = mail.outbox[0].body
    link = (
        f"https://support.example.com/console/conversations/{conversation.public_id}/?client=acme"
    )
    assert link in body
    assert "GuideDesk admin" not in body

    # The link opens the conversation for a member of the client.
    member = MembershipFactory(client=client_a, role=Role.AGENT).user
    browser = DjangoClient()
    browser.force_login(member)
    page = browser.get(link.removeprefix("https://support.example.com"))
    assert page.status_code == 200
    assert str(conversation.public_id) in page.content.decode()


@pytest.mark.parametrize(
    ("site", "hosts", "expected"),
    [
        ("https://gd.example/", ["x.example"], "https://gd.example"),
        ("", ["gd.example", "localhost"], "https://gd.example"),
        ("", ["127.0.0.1", "localhost"], "http://127.0.0.1:8000"),
        ("", ["*"], "http://localhost:8000"),
    ],
)
def test_site_url_falls_back_to_the_allowed_hosts(settings, site, hosts, expected):
    settings.SITE_URL, settings.ALLOWED_HOSTS = site, hosts
    assert site_url() == expected


def test_the_admin_links_to_the_console(client_a):
    browser = DjangoClient()
    browser.force_login(UserFactory(is_superuser=True))
    html = browser.get(reverse("admin:index")).content.decode()
    assert f'href="{reverse("console-queue")}" data-console-link' in html


def test_the_shop_links_to_the_console_for_signed_in_staff_only(client_a, settings):
    settings.DEMO_PAGE = True  # the demo shop at / (local settings)
    anonymous = DjangoClient().get("/").content.decode()
    assert "data-console-link" not in anonymous
    browser = DjangoClient()
    browser.force_login(MembershipFactory(client=client_a, role=Role.VIEWER).user)
    assert "data-console-link" in browser.get("/").content.decode()
