"""Reply templates: variables checked at save time, filled in per conversation and staff member,
the REST API (roles, tenants) and the console picker's endpoint."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.accounts.models import Role
from apps.conversations.services import conversation_create
from apps.core.exceptions import ApplicationError
from apps.escalations.models import ReplyTemplate, template_variables
from apps.escalations.reply_templates import (
    reply_template_create,
    template_render,
    template_values,
)
from apps.tools.models import ExecutionStatus, ToolExecution
from tests.api.conftest import assert_error
from tests.conftest import key_for, session_for
from tests.factories import ClientToolFactory, UserFactory

pytestmark = pytest.mark.django_db

BODY = "Hi {customer_name}, your order {order_id} is on its way. — {agent_name}"


def unscoped_templates():
    return ReplyTemplate.objects.unscoped("test checks the database directly")


# -- the variables ---------------------------------------------------------------------------


def test_known_variables_and_literal_braces_are_accepted():
    assert template_variables(BODY) == ["customer_name", "order_id", "agent_name"]
    assert template_variables("Use {{code}} at checkout") == []


@pytest.mark.parametrize(
    "body", ["Your {order} is here", "Hi {name}", "Code {", "Code } here", "{ order_id}x{}"]
)
def test_an_unknown_variable_or_a_lone_brace_is_refused(body):
    with pytest.raises(ValidationError):
        template_variables(body)


def test_saving_a_template_with_an_unknown_variable_names_the_body(client_a):
    with pytest.raises(ApplicationError) as raised:
        reply_template_create(client=client_a, name="Bad", shortcut="bad", body="Hi {nmae}")
    assert "body" in raised.value.extra["fields"]
    assert "{nmae}" in raised.value.extra["fields"]["body"]
    assert not unscoped_templates().exists()


def test_the_same_shortcut_twice_in_one_client_is_refused_but_fine_in_another(client_a, client_b):
    reply_template_create(client=client_a, name="One", shortcut="thanks", body="Thanks!")
    with pytest.raises(ApplicationError):
        reply_template_create(client=client_a, name="Two", shortcut="thanks", body="Thank you!")
    reply_template_create(client=client_b, name="One", shortcut="thanks", body="Thanks!")
    assert unscoped_templates().count() == 2


def test_values_come_from_the_conversation_and_the_staff_member(client_a):
    conversation, _ = conversation_create(client=client_a)
    tool = ClientToolFactory(client=client_a, name="lookup_order")
    for number, key in (("TH-1", "a"), ("TH-10042", "b")):
        ToolExecution.objects.create(
            client=client_a,
            conversation=conversation,
            tool=tool,
            params={"order_id": number},
            idempotency_key=f"k-{key}",
            status=ExecutionStatus.SUCCEEDED,
        )
    user = UserFactory(email="sam.lee@acme.example", first_name="Sam")
    values = template_values(client=client_a, conversation=conversation, user=user)
    assert values == {
        "customer_name": "",
        "customer_email": "",
        "order_id": "TH-10042",
        "agent_name": "Sam",
    }
    rendered = template_render(body=BODY + " {{ok}}", values=values)
    assert rendered.text == "Hi {customer_name}, your order TH-10042 is on its way. — Sam {ok}"
    assert rendered.missing == ["customer_name"]
    nameless = UserFactory(email="kim@acme.example")
    assert (
        template_values(client=client_a, conversation=conversation, user=nameless)["agent_name"]
        == "kim"
    )


def test_another_clients_tool_runs_never_fill_a_variable(client_a, client_b):
    conversation, _ = conversation_create(client=client_a)
    other, _ = conversation_create(client=client_b)
    ToolExecution.objects.create(
        client=client_b,
        conversation=other,
        tool=ClientToolFactory(client=client_b, name="lookup_order"),
        params={"order_id": "GX-1"},
        idempotency_key="k-b",
        status=ExecutionStatus.SUCCEEDED,
    )
    assert template_values(client=client_a, conversation=conversation, user=None)["order_id"] == ""


# -- the API ---------------------------------------------------------------------------------


def test_admin_creates_changes_and_deletes_a_template(client_a):
    admin = key_for(client_a, Role.ADMIN)
    created = admin.post(
        "/api/v1/reply-templates/",
        {"name": "Shipped", "shortcut": "shipped", "body": BODY},
        format="json",
    )
    assert created.status_code == 201, created.content
    template_id = created.json()["id"]
    changed = admin.patch(
        f"/api/v1/reply-templates/{template_id}/", {"name": "On its way"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["name"] == "On its way"
    bad = admin.patch(
        f"/api/v1/reply-templates/{template_id}/", {"body": "Hi {who}"}, format="json"
    )
    assert assert_error(bad, 400, "invalid")["fields"]["body"]
    assert unscoped_templates().get().body == BODY
    assert admin.delete(f"/api/v1/reply-templates/{template_id}/").status_code == 204
    assert not unscoped_templates().exists()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.AGENT])
def test_viewers_and_agents_read_templates_but_cannot_write_them(client_a, role):
    template = reply_template_create(client=client_a, name="T", shortcut="t", body="Hello")
    api = key_for(client_a, role)
    assert api.get("/api/v1/reply-templates/").json()["results"][0]["shortcut"] == "t"
    url = f"/api/v1/reply-templates/{template.public_id}/"
    assert_error(api.post("/api/v1/reply-templates/", {}, format="json"), 403)
    assert_error(api.patch(url, {"name": "X"}, format="json"), 403)
    assert_error(api.delete(url), 403)
    assert unscoped_templates().get().name == "T"


def test_another_client_cannot_read_change_or_delete_a_template(client_a, client_b):
    template = reply_template_create(client=client_a, name="T", shortcut="t", body="Hello")
    other = key_for(client_b, Role.OWNER)
    url = f"/api/v1/reply-templates/{template.public_id}/"
    assert other.get("/api/v1/reply-templates/").json()["results"] == []
    assert_error(other.get(url), 404)
    assert_error(other.patch(url, {"name": "Mine"}, format="json"), 404)
    assert_error(other.delete(url), 404)
    assert unscoped_templates().get().name == "T"


def test_the_list_fills_templates_in_for_a_conversation(client_a, client_b):
    reply_template_create(client=client_a, name="Shipped", shortcut="shipped", body=BODY)
    conversation, _ = conversation_create(client=client_a)
    api = session_for(client_a, Role.AGENT)
    api.staff_user.first_name = "Ana"
    api.staff_user.save()
    rows = api.get(f"/api/v1/reply-templates/?conversation={conversation.public_id}").json()
    [row] = rows["results"]
    assert row["text"] == "Hi {customer_name}, your order {order_id} is on its way. — Ana"
    assert row["missing"] == ["customer_name", "order_id"]
    other, _ = conversation_create(client=client_b)
    assert_error(api.get(f"/api/v1/reply-templates/?conversation={other.public_id}"), 404)


# -- the console picker ------------------------------------------------------------------------


def test_the_console_picker_lists_the_clients_templates_filled_in(browser_for, client_a):
    reply_template_create(client=client_a, name="Shipped", shortcut="shipped", body=BODY)
    conversation, _ = conversation_create(client=client_a)
    viewer = browser_for(Role.VIEWER)
    url = f"/console/conversations/{conversation.public_id}/reply-templates.json"
    [row] = viewer.get(url).json()["templates"]
    assert row["shortcut"] == "shipped" and row["name"] == "Shipped"
    assert row["text"].startswith("Hi {customer_name}, your order {order_id}")
    assert row["missing"] == ["customer_name", "order_id"]


def test_the_console_picker_of_another_clients_conversation_is_404(browser_for, client_b):
    conversation, _ = conversation_create(client=client_b)
    reply_template_create(client=client_b, name="Secret", shortcut="secret", body="Hidden")
    agent = browser_for(Role.AGENT)
    response = agent.get(f"/console/conversations/{conversation.public_id}/reply-templates.json")
    assert response.status_code == 404
    assert b"Hidden" not in response.content


def test_the_conversation_page_offers_the_picker_to_agents_only(browser_for, client_a):
    conversation, _ = conversation_create(client=client_a)
    url = f"/console/conversations/{conversation.public_id}/"
    assert b"data-reply-templates" in browser_for(Role.AGENT).get(url).content
    assert b"data-reply-templates" not in browser_for(Role.VIEWER).get(url).content
