"""Export and erasure by e-mail take only the conversations whose address is the customer's own
(confirmed with the e-mailed link, or the verified customer's e-mail). A stranger who typed the
same address into a chat is listed apart — in the service's result, the API's answer, the
admin page and the export file — and left alone until staff include that conversation by id."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client as WebClient
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Role as StaffRole
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role
from apps.conversations.services import conversation_create, message_append
from apps.privacy.models import DataSubjectRequest, MatchKind
from apps.privacy.selectors import SubjectMatch
from apps.privacy.services import UnconfirmedOnly, subject_erase, subject_export
from tests.conftest import api_for
from tests.factories import ClientFactory, MembershipFactory
from tests.privacy.conftest import staff_key

pytestmark = pytest.mark.django_db
URL = "/api/v1/privacy/requests/"
FIND = reverse("admin:privacy_datasubjectrequest_find")
ADDRESS = "ines.ward@example.com"
OWN = "Ines here: my boots from order TH-5510 are too small"
VERIFIED = "Ines again, signed in: can I swap them for size 40?"
STRANGER = "I am not Ines, I just typed her address: 12 Rose Lane, Leeds"


def chat(client: Client, text: str, **fields: Any) -> Conversation:
    conv, _ = conversation_create(client=client)
    message_append(client=client, conversation=conv, role=Role.USER, text=text)
    Conversation.objects.for_client(client).filter(pk=conv.pk).update(**fields)
    conv.refresh_from_db()
    return conv


@pytest.fixture
def shop(db) -> dict[str, Any]:
    client = ClientFactory(slug="boots")
    now = timezone.now()
    return {
        "client": client,
        "own": chat(client, OWN, contact_email=ADDRESS, contact_email_confirmed_at=now),
        "verified": chat(
            client,
            VERIFIED,
            customer_id="c-1",
            customer_email=ADDRESS.upper(),
            customer_verified_via="hmac",
            customer_verified_at=now,
        ),
        "stranger": chat(client, STRANGER, contact_email=ADDRESS.capitalize()),
    }


def texts(client: Client) -> set[str]:
    return set(Message.objects.for_client(client).exclude(text="").values_list("text", flat=True))


def by_email(value: str = ADDRESS) -> SubjectMatch:
    return SubjectMatch(MatchKind.EMAIL, value)


def test_export_leaves_out_and_lists_an_unconfirmed_match(shop: dict[str, Any]) -> None:
    result = subject_export(client=shop["client"], match=by_email(), channel="command")
    document = json.dumps(result.document, ensure_ascii=False)
    assert OWN in document and VERIFIED in document
    assert STRANGER not in document
    [listed] = result.document["unconfirmed_matches"]
    assert listed["id"] == str(shop["stranger"].public_id) and listed["customer_messages"] == 1
    assert result.unconfirmed == [listed]
    assert result.counts["conversations"] == 2
    assert result.request is not None and result.request.unconfirmed_left_out == 1

    included = subject_export(
        client=shop["client"],
        match=by_email(),
        channel="command",
        include_unconfirmed=[str(shop["stranger"].public_id)],
    )
    assert STRANGER in json.dumps(included.document, ensure_ascii=False)
    assert included.document["unconfirmed_matches"] == []
    flags = {c["id"]: c["contact_email_confirmed"] for c in included.document["conversations"]}
    assert flags[str(shop["stranger"].public_id)] is False
    assert flags[str(shop["own"].public_id)] is True


def test_erasure_leaves_an_unconfirmed_match_alone_until_staff_include_it(
    shop: dict[str, Any],
) -> None:
    client = shop["client"]
    erased = subject_erase(client=client, match=by_email(), channel="command")
    assert erased.conversations == 2
    assert [u["id"] for u in erased.unconfirmed] == [str(shop["stranger"].public_id)]
    assert erased.request is not None and erased.request.unconfirmed_left_out == 1
    assert texts(client) == {STRANGER}

    # Only the stranger's conversation matches now: nothing is done without staff's choice.
    with pytest.raises(UnconfirmedOnly) as refused:
        subject_erase(client=client, match=by_email(), channel="command")
    assert [u["id"] for u in refused.value.unconfirmed] == [str(shop["stranger"].public_id)]
    assert texts(client) == {STRANGER}
    subject_erase(
        client=client,
        match=by_email(),
        channel="command",
        include_unconfirmed=[str(shop["stranger"].public_id)],
    )
    assert texts(client) == set()


def test_an_id_that_is_not_an_unconfirmed_match_widens_nothing(shop: dict[str, Any]) -> None:
    client = shop["client"]
    elsewhere = chat(client, "Another customer entirely", contact_email="bo@example.com")
    result = subject_export(
        client=client,
        match=by_email(),
        channel="command",
        include_unconfirmed=[str(elsewhere.public_id), "not-a-uuid"],
    )
    assert "Another customer entirely" not in json.dumps(result.document)
    assert result.counts["conversations"] == 2


def test_api_lists_unconfirmed_matches_and_includes_them_only_when_asked(
    shop: dict[str, Any],
) -> None:
    client = shop["client"]
    api = api_for(staff_key(client))
    stranger = str(shop["stranger"].public_id)

    dry = api.post(URL, {"kind": "erase", "email": ADDRESS, "dry_run": True}, format="json")
    assert dry.status_code == 200
    assert dry.json()["conversations"] == 2
    assert [u["id"] for u in dry.json()["unconfirmed"]] == [stranger]

    exported = api.post(URL, {"kind": "export", "email": ADDRESS}, format="json")
    document = json.loads(exported.content)
    assert [u["id"] for u in document["unconfirmed_matches"]] == [stranger]
    assert STRANGER not in exported.content.decode()

    erased = api.post(URL, {"kind": "erase", "email": ADDRESS}, format="json")
    assert erased.status_code == 201
    assert erased.json()["unconfirmed_left_out"] == 1
    assert [u["id"] for u in erased.json()["unconfirmed"]] == [stranger]
    assert texts(client) == {STRANGER}

    only = api.post(URL, {"kind": "export", "email": ADDRESS}, format="json")
    assert only.status_code == 409
    assert only.json()["error"]["code"] == "unconfirmed_only"
    assert [u["id"] for u in only.json()["unconfirmed"]] == [stranger]

    included = api.post(
        URL,
        {"kind": "erase", "email": ADDRESS, "include_unconfirmed": [stranger]},
        format="json",
    )
    assert included.status_code == 201 and included.json()["conversations"] == 1
    assert texts(client) == set()


def test_another_client_cannot_include_this_clients_unconfirmed_match(
    shop: dict[str, Any],
) -> None:
    other = ClientFactory(slug="other-shop")
    mine = chat(other, "Other shop, same address", contact_email=ADDRESS)
    api = api_for(staff_key(other))
    stranger = str(shop["stranger"].public_id)
    before = texts(shop["client"])
    for kind in ("export", "erase"):
        answer = api.post(
            URL, {"kind": kind, "email": ADDRESS, "include_unconfirmed": [stranger]}, format="json"
        )
        # Only the other shop's own unconfirmed conversation is listed; shop's never.
        assert answer.status_code == 409, answer.content
        assert [u["id"] for u in answer.json()["unconfirmed"]] == [str(mine.public_id)]
        assert stranger not in answer.content.decode()
    assert texts(shop["client"]) == before
    assert not DataSubjectRequest.objects.for_client(shop["client"]).exists()
    assert not DataSubjectRequest.objects.for_client(other).exists()


def admin_web(client: Client) -> WebClient:
    user = MembershipFactory(client=client, role=StaffRole.ADMIN).user
    user.user_permissions.add(*Permission.objects.all())
    web = WebClient()
    web.force_login(user)
    return web


def test_admin_lists_unconfirmed_matches_apart_and_includes_the_ticked_ones(
    shop: dict[str, Any],
) -> None:
    client = shop["client"]
    web = admin_web(client)
    form = {"client": client.pk, "match_kind": "email", "value": ADDRESS}
    stranger = str(shop["stranger"].public_id)

    page = web.post(FIND, form).content.decode()
    found, _, apart = page.partition('id="privacy-unconfirmed"')
    assert str(shop["own"].public_id) in found and str(shop["verified"].public_id) in found
    assert stranger not in found and stranger in apart
    assert "Not included: the address was never confirmed" in apart

    # Erasing without ticking leaves the stranger's conversation alone.
    web.post(FIND, {**form, "action": "erase", "confirm": "yes"})
    assert texts(client) == {STRANGER}
    record = DataSubjectRequest.objects.for_client(client).get()
    assert record.conversations == 2 and record.unconfirmed_left_out == 1

    # Now only the stranger matches: listed with a checkbox, nothing else offered.
    page = web.post(FIND, form).content.decode()
    assert 'id="privacy-erase"' not in page and f'value="{stranger}"' in page
    ticked = web.post(FIND, {**form, "include_unconfirmed": [stranger]}).content.decode()
    assert 'id="privacy-erase"' in ticked
    assert f'<input type="hidden" name="include_unconfirmed" value="{stranger}">' in ticked
    web.post(FIND, {**form, "include_unconfirmed": [stranger], "action": "erase", "confirm": "yes"})
    assert texts(client) == set()
