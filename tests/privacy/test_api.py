"""The privacy API: export and erase one customer of the caller's client, dry runs, the record;
admins only; another client's customer is out of reach even with the same e-mail address."""

from __future__ import annotations

import json

import pytest

from apps.accounts.models import Role as StaffRole
from apps.conversations.models import Conversation, Message
from apps.privacy.models import DataSubjectRequest
from tests.conftest import api_for
from tests.privacy.conftest import EMAIL, NAME, VISITOR, Customer, rows_holding, staff_key

pytestmark = pytest.mark.django_db
URL = "/api/v1/privacy/requests/"


def test_admin_erases_by_email_and_the_record_shows_it(
    customer_a: Customer, customer_b: Customer
) -> None:
    api = api_for(staff_key(customer_a.client))
    answer = api.post(URL, {"kind": "erase", "email": EMAIL.upper()}, format="json")
    assert answer.status_code == 201, answer.content
    record = answer.json()
    assert record["kind"] == "erase" and record["conversations"] == 2
    assert record["channel"] == "api" and record["requested_by"].startswith("API key privacy")
    assert record["counts"]["conversations.Conversation"] == 2
    assert EMAIL not in answer.content.decode()
    assert rows_holding(customer_a.needles, skip_client=customer_b.client) == []
    # The same address at client B is B's customer: untouched.
    assert Conversation.objects.for_client(customer_b.client).filter(contact_email=EMAIL).exists()
    listed = api.get(URL).json()
    assert [r["id"] for r in listed["results"]] == [record["id"]]
    assert api.get(f"{URL}{record['id']}/").json()["counts"] == record["counts"]


def test_export_is_one_json_file_of_what_the_customer_saw(customer_a: Customer) -> None:
    api = api_for(staff_key(customer_a.client))
    answer = api.post(URL, {"kind": "export", "email": EMAIL}, format="json")
    assert answer.status_code == 200
    assert answer["Content-Disposition"].startswith('attachment; filename="customer-data-')
    document = json.loads(answer.content)
    assert document["format"] == "guidedesk.subject-export/1"
    first, second = document["conversations"]
    texts = [m["text"] for m in first["messages"]]
    for text in customer_a.texts[:4]:
        assert text in texts
    assert f"Done, {NAME}: order TH-12345 is cancelled." in texts
    # Visible messages only: no assessment, critique or guard.
    assert {m["kind"] for m in first["messages"]} <= {"text", "confirmation_request", "handoff"}
    [call] = first["tool_calls"]
    assert call["tool"] == "cancel_order" and call["params"] == {"order_id": "TH-12345"}
    assert call["result"]["status"] == "cancelled"
    assert [e["kind"] for e in first["emails"]] == ["address_confirmation", "staff_replies"]
    assert first["visitor_id"] == VISITOR and first["escalations"][0]["status"] == "open"
    assert second["messages"][0]["text"] == customer_a.texts[-1]
    # Recorded with counts; nothing was erased.
    record = DataSubjectRequest.objects.for_client(customer_a.client).get()
    assert record.kind == "export" and str(record.public_id) == document["request"]
    assert record.counts["messages"] == len(first["messages"]) + len(second["messages"])
    assert record.counts["tool_calls"] == 1
    assert Message.objects.filter(client=customer_a.client, text=customer_a.texts[0]).exists()


def test_export_as_a_readable_page(customer_a: Customer) -> None:
    api = api_for(staff_key(customer_a.client))
    second = str(customer_a.conversations[1].public_id)
    answer = api.post(
        URL, {"kind": "export", "conversation": second, "format": "html"}, format="json"
    )
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/html")
    page = answer.content.decode()
    assert "do you ship hiking poles to Lisbon?" in page and "<html" in page
    assert customer_a.texts[0] not in page  # the other conversation was not asked for


def test_dry_runs_change_and_record_nothing(customer_a: Customer) -> None:
    api = api_for(staff_key(customer_a.client))
    erase = api.post(URL, {"kind": "erase", "visitor": VISITOR, "dry_run": True}, format="json")
    assert erase.status_code == 200
    assert erase.json()["dry_run"] is True and erase.json()["conversations"] == 1
    assert erase.json()["counts"]["conversations.Message"] > 5
    export = api.post(URL, {"kind": "export", "email": EMAIL, "dry_run": True}, format="json")
    assert export.json()["counts"]["conversations"] == 2
    assert not DataSubjectRequest.objects.for_client(customer_a.client).exists()
    assert rows_holding([NAME])


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "erase"},
        {"kind": "erase", "email": EMAIL, "visitor": VISITOR},
        {"kind": "erase", "email": "not-an-address"},
        {"kind": "delete", "email": EMAIL},
        {"kind": "export", "conversation": "not-a-uuid"},
    ],
)
def test_a_bad_request_is_a_400_naming_the_field(customer_a: Customer, body: dict) -> None:
    answer = api_for(staff_key(customer_a.client)).post(URL, body, format="json")
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"]
    assert rows_holding([NAME])


def test_another_clients_customer_is_not_found(customer_a: Customer, shop_b) -> None:
    api_b = api_for(staff_key(shop_b))
    conversation = str(customer_a.conversations[0].public_id)
    for body in (
        {"kind": "erase", "email": EMAIL},
        {"kind": "erase", "conversation": conversation},
        {"kind": "erase", "visitor": VISITOR},
        {"kind": "export", "email": EMAIL},
        {"kind": "export", "conversation": conversation},
    ):
        answer = api_b.post(URL, body, format="json")
        assert answer.status_code == 404, body
        assert NAME not in answer.content.decode()
    assert not DataSubjectRequest.objects.for_client(shop_b).exists()
    before = rows_holding(customer_a.needles)
    assert before
    # A's record is not B's to read either.
    api_a = api_for(staff_key(customer_a.client))
    record = api_a.post(URL, {"kind": "export", "email": EMAIL}, format="json")
    record_id = DataSubjectRequest.objects.for_client(customer_a.client).get().public_id
    assert record.status_code == 200
    assert api_b.get(f"{URL}{record_id}/").status_code == 404
    assert api_b.get(URL).json()["results"] == []


@pytest.mark.parametrize("role", [StaffRole.VIEWER, StaffRole.AGENT])
def test_only_admins(customer_a: Customer, role: str) -> None:
    api = api_for(staff_key(customer_a.client, role))
    assert api.get(URL).status_code == 403
    for kind in ("erase", "export"):
        answer = api.post(URL, {"kind": kind, "email": EMAIL}, format="json")
        assert answer.status_code == 403
    assert rows_holding([NAME])
    assert not DataSubjectRequest.objects.for_client(customer_a.client).exists()


def test_staff_session_of_an_admin(customer_a: Customer) -> None:
    from rest_framework.test import APIClient

    from tests.factories import MembershipFactory, UserFactory

    user = UserFactory()
    MembershipFactory(user=user, client=customer_a.client, role=StaffRole.ADMIN)
    api = APIClient()
    api.force_authenticate(user)
    answer = api.post(URL, {"kind": "erase", "email": EMAIL}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["requested_by"] == user.email
    record = DataSubjectRequest.objects.for_client(customer_a.client).get()
    assert record.requested_by == user
