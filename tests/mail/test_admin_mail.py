"""The e-mail channel in the admin: an admin adds a channel through the form (its secret is
write-only, shown as "set", the inbound URL shown to copy); an e-mail's page shows it as it was
with its HTML as escaped source, never rendered; attachments download for staff of that client
only, as files the browser will not run."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role
from apps.mail.models import MailChannel
from tests.factories import MembershipFactory, UserFactory
from tests.mail.staff_data import make_thread, media_root  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET = "mailgun-signing-key-0123456789"


def staff_of(client: Any, role: str) -> Any:
    member = MembershipFactory(client=client, role=role, user=UserFactory(is_staff=True))
    member.user.user_permissions.add(*Permission.objects.filter(content_type__app_label="mail"))
    return member.user


def channel_form(client: Any, **changes: Any) -> dict[str, Any]:
    return {
        "client": client.pk,
        "address": "support@acme.example",
        "display_name": "Acme support",
        "inbound_via": "mailgun",
        "webhook_secret": SECRET,
        "imap_host": "",
        "imap_port": 993,
        "imap_ssl": "on",
        "imap_username": "",
        "imap_password": "",
        "imap_folder": "INBOX",
        "trusted_authserv_id": "",
        "max_replies_per_thread_hour": 5,
        "max_replies_per_sender_hour": 10,
        "max_attachment_bytes": 10485760,
        "enabled": "on",
        **changes,
    }


def test_an_admin_adds_a_channel_and_its_secret_is_never_shown(client, client_a):
    client.force_login(staff_of(client_a, Role.ADMIN))
    response = client.post(reverse("admin:mail_mailchannel_add"), channel_form(client_a))
    assert response.status_code == 302, response.content.decode()[:2000]
    channel = MailChannel.objects.for_client(client_a).get()
    assert channel.webhook_secret == SECRET
    assert len(channel.inbound_token) >= 40
    page = client.get(reverse("admin:mail_mailchannel_change", args=[channel.pk]))
    body = page.content.decode()
    assert SECRET not in body
    assert f"/mail/inbound/{channel.inbound_token}/" in body
    assert "webhook secret: set" in body
    # Saving again with the secret box empty keeps it.
    again = client.post(
        reverse("admin:mail_mailchannel_change", args=[channel.pk]),
        channel_form(client_a, webhook_secret="", display_name="Acme help"),
    )
    assert again.status_code == 302
    channel.refresh_from_db()
    assert (channel.webhook_secret, channel.display_name) == (SECRET, "Acme help")


def test_the_form_refuses_a_webhook_channel_without_a_secret(client, client_a):
    client.force_login(staff_of(client_a, Role.ADMIN))
    response = client.post(
        reverse("admin:mail_mailchannel_add"), channel_form(client_a, webhook_secret="")
    )
    assert response.status_code == 200
    assert "Needed to check that inbound mail really comes from the provider" in (
        response.content.decode()
    )
    assert not MailChannel.objects.for_client(client_a).exists()


def test_an_email_is_shown_as_it_was_and_its_html_never_runs(client, client_a, media_root):  # noqa: F811
    thread = make_thread(client_a)
    client.force_login(staff_of(client_a, Role.VIEWER))
    page = client.get(reverse("admin:mail_mailmessage_change", args=[thread.inbound.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "Cancel my order" in body
    assert "&gt; an older quoted line" in body
    assert "<script>alert" not in body
    assert 'onerror="alert' not in body
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in body
    assert "receipt.pdf" in body and "movie.mov" in body
    assert "larger than the channel&#x27;s limit" in body


def test_attachments_download_for_that_clients_staff_only(
    client,
    client_a,
    client_b,
    media_root,  # noqa: F811
):
    thread = make_thread(client_a)
    url = reverse("admin:mail_mailattachment_download", args=[thread.attachment.pk])
    client.force_login(staff_of(client_a, Role.VIEWER))
    response = client.get(url)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"%PDF-1.4\n"
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    refused = reverse("admin:mail_mailattachment_download", args=[thread.refused.pk])
    assert client.get(refused).status_code == 404
    client.force_login(staff_of(client_b, Role.OWNER))
    assert client.get(url).status_code in {403, 404}
