"""The e-mail code setting: accepted by the tenant import with clear errors, exported, editable
in the admin; the admin lists codes sent without ever showing one."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.clients.models import Client
from apps.conversations.services import conversation_create
from apps.core.exceptions import ApplicationError
from apps.identity.models import EmailCodeChallenge, EmailCodeSetting
from apps.identity.services import otp_offer
from apps.provisioning.services import client_export, tenant_import
from tests.identity.conftest import LOOKUP_SCHEMA
from tests.support.tenant_files import one_client_tenant

pytestmark = pytest.mark.django_db

TOOL: dict[str, Any] = {
    "name": "order_status",
    "description": "Look up an order.",
    "kind": "read",
    "parameters": LOOKUP_SCHEMA,
    "executor": {
        "type": "webhook",
        "url": "https://shop.example/hook",
        "secret": "shop-signing-secret",
    },
}
CANCEL: dict[str, Any] = {**TOOL, "name": "cancel_order", "kind": "destructive"}
CODE = {"tool": "order_status", "email_field": "customer.email", "id_field": "customer.id"}


def tenant(**client: Any) -> dict[str, Any]:
    return one_client_tenant(plan={"ai_mode": "standard"}, **({"tools": [TOOL]} | client))


def setting() -> EmailCodeSetting:
    return EmailCodeSetting.objects.for_client(Client.objects.get(slug="shop")).get()


def test_the_import_stores_the_setting_and_the_export_gives_it_back() -> None:
    tenant_import(data=tenant(email_code=CODE))
    stored = setting()
    assert (stored.tool_name, stored.email_field, stored.id_field, stored.enabled) == (
        "order_status",
        "customer.email",
        "customer.id",
        True,
    )
    exported = client_export(client=Client.objects.get(slug="shop"))
    assert exported["email_code"] == {**CODE, "enabled": True}
    # Left out on a later import: the setting stays.
    tenant_import(data=tenant())
    assert setting().email_field == "customer.email"
    tenant_import(data=tenant(email_code={**CODE, "id_field": "", "enabled": False}))
    assert (setting().id_field, setting().enabled) == ("", False)


@pytest.mark.parametrize(
    ("email_code", "tools", "path", "words"),
    [
        ({**CODE, "tool": "lookup"}, [TOOL], "clients[0].email_code.tool", "no tool named"),
        ({**CODE, "tool": "cancel_order"}, [TOOL, CANCEL], "clients[0]", "read tool"),
        ({**CODE, "email_field": "customer..email"}, [TOOL], "email_code.email_field", ""),
        ({**CODE, "id_field": "a b"}, [TOOL], "email_code.id_field", ""),
        ({"tool": "order_status"}, [TOOL], "email_code.email_field", "required"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_field(email_code, tools, path, words) -> None:
    with pytest.raises(ApplicationError) as raised:
        tenant_import(data=tenant(email_code=email_code, tools=tools))
    message = str(raised.value)
    assert path in message and words.lower() in message.lower()
    assert not Client.objects.filter(slug="shop").exists()  # all or nothing


def test_a_stored_non_read_tool_is_refused_at_import() -> None:
    tenant_import(data=tenant(tools=[TOOL, CANCEL]))
    with pytest.raises(ApplicationError) as raised:
        tenant_import(data=tenant(tools=[TOOL], email_code={**CODE, "tool": "cancel_order"}))
    assert "clients[0].email_code.tool" in str(raised.value)
    assert "not a read tool" in str(raised.value)


def test_the_admin_edits_the_setting_and_refuses_a_tool_that_is_not_a_read_tool(admin_client):
    tenant_import(data=tenant(tools=[TOOL, CANCEL]))
    shop = Client.objects.get(slug="shop")
    url = reverse("admin:identity_emailcodesetting_add")
    form = {"client": shop.pk, "email_field": "customer.email", "id_field": "", "enabled": "on"}
    refused = admin_client.post(url, {**form, "tool_name": "cancel_order"})
    assert refused.status_code == 200
    assert "not a read tool" in refused.content.decode()
    assert not EmailCodeSetting.objects.for_client(shop).exists()
    saved = admin_client.post(url, {**form, "tool_name": "order_status"})
    assert saved.status_code == 302
    assert setting().tool_name == "order_status"


def test_the_admin_lists_codes_sent_but_never_a_code(admin_client, shop, conversation, hook):
    from django.core import mail

    otp_offer(client=shop, conversation=conversation, params={"order_id": "TH-12345"})
    challenge = EmailCodeChallenge.objects.for_client(shop).get()
    code = next(w for w in mail.outbox[0].body.split() if w.isdigit() and len(w) == 6)
    listing = admin_client.get(reverse("admin:identity_emailcodechallenge_changelist"))
    detail = admin_client.get(
        reverse("admin:identity_emailcodechallenge_change", args=[challenge.pk])
    )
    for page in (listing, detail):
        assert page.status_code == 200
        text = page.content.decode()
        assert "jane@example.com" in text
        assert code not in text and challenge.code_hash not in text


def test_the_conversation_admin_shows_the_verified_customer(admin_client, shop):
    conversation = conversation_create(client=shop)[0]
    conversation.customer_id, conversation.customer_email = "C-42", "jane@example.com"
    conversation.customer_verified_via = "email_code"
    conversation.save()
    page = admin_client.get(
        reverse("admin:conversations_conversation_change", args=[conversation.pk])
    )
    text = page.content.decode()
    assert "Verified customer" in text and "C-42" in text and "One-time code by e-mail" in text
