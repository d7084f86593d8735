"""The tenant file's `reply_templates`: the demo ships five, the console's picker lists them for
a demo conversation; created or updated by shortcut, never deleted; a bad variable or a repeated
shortcut fails the file naming the place; export writes them back."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.models import Role
from apps.clients.models import Client
from apps.conversations.services import conversation_create
from apps.core.exceptions import ApplicationError
from apps.escalations.models import ReplyTemplate
from apps.escalations.reply_templates import reply_template_create, reply_template_list
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import client_export, tenant_import
from tests.conftest import DEMO_TENANT
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def tenant(templates: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "plans": [{"slug": "rt", "name": "RT"}],
        "clients": [
            {"slug": "rt-shop", "name": "RT Shop", "plan": "rt", "reply_templates": templates}
        ],
    }


THANKS = {"name": "Thanks", "shortcut": "thanks", "body": "Thanks, {customer_name}! — {agent_name}"}


def test_the_demo_ships_five_templates_the_picker_lists_for_a_demo_conversation(client):
    tenant_import(data=load_tenant_file(DEMO_TENANT))
    demo = Client.objects.get(slug="trailhead")
    templates = list(reply_template_list(client=demo))
    assert len(templates) == 5
    assert {"hi", "checking", "refund-sent", "cancelled", "anything-else"} == {
        t.shortcut for t in templates
    }
    member = MembershipFactory(client=demo, role=Role.AGENT).user
    client.force_login(member)
    conversation, _ = conversation_create(client=demo)
    listed = client.get(
        f"/console/conversations/{conversation.public_id}/reply-templates.json?client=trailhead"
    ).json()["templates"]
    assert len(listed) == 5
    by_shortcut = {t["shortcut"]: t for t in listed}
    # nothing acted on yet, no verified name: those stay to be filled in, the agent is known
    assert by_shortcut["refund-sent"]["missing"] == ["order_id"]
    assert by_shortcut["hi"]["missing"] == ["customer_name"]
    assert by_shortcut["anything-else"]["missing"] == []


def test_templates_are_created_updated_by_shortcut_and_never_deleted():
    tenant_import(data=tenant([THANKS]))
    shop = Client.objects.get(slug="rt-shop")
    reply_template_create(client=shop, name="Staff's own", shortcut="own", body="Hello")
    changed = {**THANKS, "body": "Thank you, {customer_name}. — {agent_name}"}
    tenant_import(data=tenant([changed]))
    rows = {t.shortcut: t.body for t in reply_template_list(client=shop)}
    assert rows == {"thanks": changed["body"], "own": "Hello"}
    before = ReplyTemplate.objects.for_client(shop).get(shortcut="thanks").updated_at
    tenant_import(data=tenant([changed]))  # unchanged: not written again
    assert ReplyTemplate.objects.for_client(shop).get(shortcut="thanks").updated_at == before
    exported = client_export(client=shop)["reply_templates"]
    assert {"name": "Thanks", "shortcut": "thanks", "body": changed["body"]} in exported


@pytest.mark.parametrize(
    ("templates", "place"),
    [
        ([{**THANKS, "body": "Hi {first_name}"}], "clients[0].reply_templates[0].body"),
        ([{**THANKS, "shortcut": "has space"}], "clients[0].reply_templates[0].shortcut"),
        ([THANKS, {**THANKS, "name": "Again"}], "shortcut used twice: thanks"),
    ],
)
def test_a_bad_template_fails_the_file_naming_the_place(templates, place):
    with pytest.raises(ApplicationError) as refused:
        tenant_import(data=tenant(templates))
    assert place in str(refused.value)
    assert not Client.objects.filter(slug="rt-shop").exists()
