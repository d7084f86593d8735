"""The admin's "Find a customer" page: a support lead of the client finds the customer by
e-mail, sees what an erasure would take, downloads the export and erases after confirming;
the record is visible to the client's admins only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client as WebClient
from django.urls import reverse

from apps.accounts.models import Role as StaffRole
from apps.clients.models import Client
from apps.privacy.models import DataSubjectRequest
from tests.factories import MembershipFactory
from tests.privacy.conftest import EMAIL, NAME, Customer, rows_holding

pytestmark = pytest.mark.django_db
FIND = reverse("admin:privacy_datasubjectrequest_find")
LIST = reverse("admin:privacy_datasubjectrequest_changelist")


def staff(client: Client, role: str) -> WebClient:
    user = MembershipFactory(client=client, role=role).user
    user.user_permissions.add(*Permission.objects.all())  # only the role stands in the way
    web = WebClient()
    web.force_login(user)
    return web


def find(web: WebClient, client: Client, **extra: Any) -> Any:
    return web.post(FIND, {"client": client.pk, "match_kind": "email", "value": EMAIL, **extra})


def test_a_support_lead_finds_exports_and_erases(customer_a: Customer) -> None:
    client = customer_a.client
    web = staff(client, StaffRole.ADMIN)
    assert "Find a customer" in web.get(LIST).content.decode()
    assert web.get(FIND).status_code == 200

    page = find(web, client).content.decode()
    for conversation in customer_a.conversations:
        assert str(conversation.public_id) in page
    assert "conversations.Message:" in page and 'id="privacy-erase"' in page
    assert rows_holding([NAME])  # finding is a dry run

    download = find(web, client, action="export_json")
    assert download["Content-Disposition"].startswith("attachment;")
    document = json.loads(download.content)
    assert len(document["conversations"]) == 2
    html = find(web, client, action="export_html")
    assert customer_a.texts[0] in html.content.decode()

    unconfirmed = find(web, client, action="erase")
    assert "Tick the confirmation" in unconfirmed.content.decode()
    assert rows_holding([NAME])

    erased = find(web, client, action="erase", confirm="yes")
    assert erased.status_code == 302
    assert rows_holding(customer_a.needles) == []
    records = DataSubjectRequest.objects.for_client(client).order_by("created_at")
    assert [r.kind for r in records] == ["export", "export", "erase"]
    assert all(r.channel == "admin" and r.requested_by is not None for r in records)
    record_page = web.get(erased["Location"]).content.decode()
    assert "conversations.Message" in record_page and EMAIL not in record_page
    assert "No conversation of this business matches" in find(web, client).content.decode()


@pytest.mark.parametrize("role", [StaffRole.VIEWER, StaffRole.AGENT])
def test_viewers_and_agents_cannot(customer_a: Customer, role: str) -> None:
    client = customer_a.client
    web = staff(client, role)
    assert web.get(LIST).status_code == 403
    assert web.get(FIND).status_code == 404
    assert find(web, client, action="erase", confirm="yes").status_code == 404
    assert find(web, client, action="export_json").status_code == 404
    assert rows_holding([NAME])


def test_another_clients_admin_cannot_reach_the_customer(
    customer_a: Customer, customer_b: Customer
) -> None:
    web = staff(customer_b.client, StaffRole.ADMIN)
    for action in ("find", "export_json", "erase"):
        answer = find(web, customer_a.client, action=action, confirm="yes")
        assert answer.status_code == 404
    assert rows_holding(customer_a.needles, skip_client=customer_b.client)
    # Their own customer with the same address is theirs to erase, and only that one.
    assert find(web, customer_b.client, action="erase", confirm="yes").status_code == 302
    assert rows_holding(customer_a.needles, skip_client=customer_b.client)
    assert rows_holding(customer_b.needles, skip_client=customer_a.client) == []
    # A's records are not listed for B's admin.
    DataSubjectRequest.objects.create(
        client=customer_a.client,
        kind="export",
        match_kind="email",
        channel="api",
        keep_until="2030-01-01",
    )
    listing = web.get(LIST).content.decode()
    assert listing.count('class="field-kind"') == 1
