"""Export and erasure by a verified customer id (docs/privacy.md): the conversations whose
customer the business's site verified with that id — on every device — and only those; an
anonymous visitor who typed the same id as their visitor id is not that customer, and another
client's customer with the same id is out of reach."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from apps.clients.identity import Identity
from apps.conversations.models import Conversation, Role
from apps.conversations.services import (
    conversation_create,
    conversation_customer_verify,
    message_append,
)
from apps.privacy.models import DataSubjectRequest, MatchKind
from apps.privacy.selectors import SubjectMatch
from apps.privacy.services import subject_erase
from tests.conftest import api_for
from tests.privacy.conftest import staff_key

pytestmark = pytest.mark.django_db
URL = "/api/v1/privacy/requests/"
CUSTOMER = "cust-8812"


def verified(client, text: str, customer_id: str = CUSTOMER) -> Conversation:
    conversation = conversation_create(client=client)[0]
    conversation_customer_verify(
        client=client,
        conversation=conversation,
        identity=Identity(customer_id=customer_id, email="", name="", via="hmac"),
    )
    message_append(client=client, conversation=conversation, role=Role.USER, text=text)
    return conversation


@pytest.fixture
def held(client_a, client_b):
    return {
        "mine": [verified(client_a, "laptop: where is TH-1"), verified(client_a, "phone: hi")],
        "other_customer": verified(client_a, "someone else", customer_id="cust-0001"),
        # Typed, not signed: the same text as a visitor id is not the verified customer.
        "anonymous": conversation_create(client=client_a, visitor_id=CUSTOMER)[0],
        "tenant_b": verified(client_b, "B's own customer"),
    }


def test_export_by_customer_id_via_the_api(client_a, held):
    api = api_for(staff_key(client_a))
    answer = api.post(URL, {"kind": "export", "customer": CUSTOMER}, format="json")
    assert answer.status_code == 200, answer.content
    document = json.loads(answer.content)
    ids = {c["id"] for c in document["conversations"]}
    assert ids == {str(c.public_id) for c in held["mine"]}
    assert {c["customer"]["id"] for c in document["conversations"]} == {CUSTOMER}
    record = DataSubjectRequest.objects.for_client(client_a).get()
    assert record.match_kind == MatchKind.CUSTOMER and CUSTOMER not in record.match_digest


def test_erase_by_customer_id_leaves_everyone_else(client_a, client_b, held):
    result = subject_erase(
        client=client_a, match=SubjectMatch(MatchKind.CUSTOMER, CUSTOMER), channel="admin"
    )
    assert result.conversations == 2
    rows = Conversation.objects.for_client(client_a)
    assert not rows.filter(customer_id=CUSTOMER).exists()
    assert rows.filter(pk=held["other_customer"].pk, customer_id="cust-0001").exists()
    assert rows.filter(pk=held["anonymous"].pk, visitor_id=CUSTOMER).exists()
    assert Conversation.objects.for_client(client_b).filter(customer_id=CUSTOMER).exists()


def test_tenant_b_cannot_export_or_erase_tenant_as_customer(client_a, client_b, held):
    api_b = api_for(staff_key(client_b))
    held["tenant_b"].delete()  # B has no customer of that id of its own
    for kind in ("export", "erase"):
        answer = api_b.post(URL, {"kind": kind, "customer": CUSTOMER}, format="json")
        assert answer.status_code == 404, answer.content
    assert Conversation.objects.for_client(client_a).filter(customer_id=CUSTOMER).count() == 2
    assert not DataSubjectRequest.objects.for_client(client_b).exists()


def test_the_erase_command_takes_a_customer_id(client_a, held):
    out = StringIO()
    call_command("privacy_erase", "--client", client_a.slug, "--customer", CUSTOMER, stdout=out)
    assert not Conversation.objects.for_client(client_a).filter(customer_id=CUSTOMER).exists()
    assert Conversation.objects.for_client(client_a).filter(customer_id="cust-0001").exists()


def test_one_match_field_only(client_a, held):
    api = api_for(staff_key(client_a))
    answer = api.post(
        URL, {"kind": "erase", "customer": CUSTOMER, "visitor": CUSTOMER}, format="json"
    )
    assert answer.status_code == 400
