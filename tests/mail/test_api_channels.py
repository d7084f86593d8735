"""/api/v1/mail-channels/ and /api/v1/conversations/<id>/emails/: secrets are write-only and
never read back, the inbound webhook URL is in the body, bad settings are refused naming the
field, the admin role, a channel with e-mails is kept (409), and client B can neither see nor
change client A's channels or e-mails (404, nothing changed)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.models import Role
from apps.mail.models import MailChannel
from tests.api.conftest import assert_error
from tests.conftest import key_for
from tests.mail.staff_data import make_thread, media_root  # noqa: F401
from tests.support.rows import client_rows

pytestmark = pytest.mark.django_db

BASE = "/api/v1/mail-channels/"
SECRET = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
IMAP_PASSWORD = "imap-pass-w0rd-secret"


def mailgun_body(**changes: Any) -> dict[str, Any]:
    return {
        "address": "support@shop.example",
        "display_name": "Shop support",
        "inbound_via": "mailgun",
        "webhook_secret": SECRET,
        **changes,
    }


@pytest.fixture
def created(owner_a: Any) -> dict[str, Any]:
    response = owner_a.post(BASE, mailgun_body(), format="json")
    assert response.status_code == 201, response.content
    return dict(response.json())


def snapshot(client: Any) -> list[tuple[Any, ...]]:
    return client_rows(
        MailChannel, client, "address", "inbound_via", "webhook_secret", "imap_password", "enabled"
    )


def test_a_new_channel_has_an_inbound_url_and_never_shows_its_secret(created, owner_a):
    assert created["inbound_url"].startswith("http")
    assert "/mail/inbound/" in created["inbound_url"]
    assert created["has_webhook_secret"] is True
    assert created["has_imap_password"] is False
    listed = owner_a.get(BASE)
    read = owner_a.get(f"{BASE}{created['id']}/")
    for response in (listed, read):
        assert response.status_code == 200
        assert SECRET not in response.content.decode()
    assert listed.json()["results"][0]["inbound_url"] == created["inbound_url"]
    assert read.json()["address"] == "support@shop.example"


def test_two_channels_get_different_unguessable_urls(created, owner_a):
    other = owner_a.post(BASE, mailgun_body(address="billing@shop.example"), format="json")
    assert other.status_code == 201
    assert other.json()["inbound_url"] != created["inbound_url"]
    token = created["inbound_url"].rstrip("/").rsplit("/", 1)[-1]
    assert len(token) >= 40


def test_an_imap_channel_needs_its_mailbox_and_keeps_the_password(owner_a, client_a):
    refused = owner_a.post(
        BASE, {"address": "help@shop.example", "inbound_via": "imap"}, format="json"
    )
    error = assert_error(refused, 400, "invalid")
    assert {"imap_host", "imap_username", "imap_password"} <= set(error["fields"])
    body = {
        "address": "help@shop.example",
        "inbound_via": "imap",
        "imap_host": "imap.shop.example",
        "imap_username": "help",
        "imap_password": IMAP_PASSWORD,
    }
    created = owner_a.post(BASE, body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["inbound_url"] == ""
    assert IMAP_PASSWORD not in created.content.decode()
    url = f"{BASE}{created.json()['id']}/"
    changed = owner_a.patch(url, {"imap_password": "", "imap_port": 143}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["imap_port"] == 143
    channel = MailChannel.objects.for_client(client_a).get(address="help@shop.example")
    assert channel.imap_password == IMAP_PASSWORD


def test_a_webhook_channel_without_a_secret_is_refused_naming_it(owner_a):
    error = assert_error(
        owner_a.post(BASE, mailgun_body(webhook_secret=""), format="json"), 400, "invalid"
    )
    assert list(error["fields"]) == ["webhook_secret"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"address": "not an address"}, "address"),
        ({"inbound_via": "carrier-pigeon"}, "inbound_via"),
        ({"max_replies_per_thread_hour": 500}, "max_replies_per_thread_hour"),
        ({"max_attachment_bytes": -1}, "max_attachment_bytes"),
        ({"inbound_token": "mine"}, "inbound_token"),
        ({"client": 1}, "client"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(owner_a, client_a, changes, field):
    error = assert_error(owner_a.post(BASE, mailgun_body(**changes), format="json"), 400)
    assert field in error["fields"]
    assert snapshot(client_a) == []


def test_the_same_address_twice_is_refused(created, owner_a):
    again = owner_a.post(BASE, mailgun_body(address="SUPPORT@shop.example"), format="json")
    assert list(assert_error(again, 400, "invalid")["fields"]) == ["address"]


def test_patch_keeps_the_secret_and_disables(created, owner_a, client_a):
    url = f"{BASE}{created['id']}/"
    changed = owner_a.patch(url, {"enabled": False, "webhook_secret": ""}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["enabled"] is False
    assert MailChannel.objects.for_client(client_a).get().webhook_secret == SECRET


def test_a_channel_without_mail_is_deleted_one_with_mail_is_kept(
    created,
    owner_a,
    client_a,
    media_root,  # noqa: F811
):
    assert owner_a.delete(f"{BASE}{created['id']}/").status_code == 204
    assert snapshot(client_a) == []
    thread = make_thread(client_a)
    url = f"{BASE}{thread.channel.public_id}/"
    assert_error(owner_a.delete(url), 409, "in_use")
    assert MailChannel.objects.for_client(client_a).filter(pk=thread.channel.pk).exists()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT])
def test_mail_channels_need_the_admin_role(created, client_a, role):
    api = key_for(client_a, role)
    before = snapshot(client_a)
    url = f"{BASE}{created['id']}/"
    assert_error(api.get(BASE), 403, "permission_denied")
    assert_error(api.post(BASE, mailgun_body(address="x@shop.example"), format="json"), 403)
    assert_error(api.get(url), 403)
    assert_error(api.patch(url, {"enabled": False}, format="json"), 403)
    assert_error(api.delete(url), 403)
    assert snapshot(client_a) == before


def test_client_b_cannot_list_read_change_or_delete_client_as_channel(
    created,
    owner_b,
    client_a,
):
    before = snapshot(client_a)
    url = f"{BASE}{created['id']}/"
    assert owner_b.get(BASE).json()["results"] == []
    assert_error(owner_b.get(url), 404, "not_found")
    assert_error(
        owner_b.patch(url, {"enabled": False, "address": "x@evil.example"}, format="json"), 404
    )
    assert_error(owner_b.delete(url), 404)
    assert_error(owner_b.get(f"{BASE}not-a-uuid/"), 404)
    assert snapshot(client_a) == before


def test_a_conversation_shows_its_channel_and_its_emails_as_they_were(
    owner_a,
    client_a,
    media_root,  # noqa: F811
):
    thread = make_thread(client_a)
    detail = owner_a.get(f"/api/v1/conversations/{thread.conversation.public_id}/")
    assert detail.status_code == 200
    assert detail.json()["channel"] == "email"
    listed = owner_a.get("/api/v1/conversations/").json()["results"]
    assert [c["channel"] for c in listed if c["id"] == str(thread.conversation.public_id)] == [
        "email"
    ]
    emails = owner_a.get(f"/api/v1/conversations/{thread.conversation.public_id}/emails/")
    assert emails.status_code == 200, emails.content
    inbound, reply = emails.json()["results"]
    assert (inbound["direction"], inbound["disposition"]) == ("in", "accepted")
    assert inbound["subject"] == "Cancel my order"
    assert "> an older quoted line" in inbound["text"]
    assert inbound["message_seq"] == thread.customer_message.seq
    assert [(a["filename"], a["kept"]) for a in inbound["attachments"]] == [
        ("receipt.pdf", True),
        ("movie.mov", False),
    ]
    assert reply["in_reply_to"] == "CAF-1@mail.example.com"


def test_client_b_cannot_read_client_as_emails(owner_b, client_a, media_root):  # noqa: F811
    thread = make_thread(client_a)
    response = owner_b.get(f"/api/v1/conversations/{thread.conversation.public_id}/emails/")
    assert_error(response, 404, "not_found")
