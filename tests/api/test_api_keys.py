"""GET/POST /api/v1/api-keys/ and POST /api/v1/api-keys/<id>/revoke."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.models import ApiKey, Role
from apps.accounts.services import api_key_issue
from tests.api.conftest import assert_error
from tests.conftest import api_for, key_for, session_for

pytestmark = pytest.mark.django_db

LIST_URL = reverse("api-key-list")


def revoke_url(key_id: int | str) -> str:
    return reverse("api-key-revoke", args=[key_id])


def test_list_shows_keys_without_secrets(client_a, owner_a):
    key, secret = api_key_issue(client=client_a, name="ERP sync", role=Role.VIEWER)
    response = owner_a.get(LIST_URL)
    assert response.status_code == 200
    items = response.json()["results"]
    assert [i["name"] for i in items] == ["ERP sync", "owner key"]  # newest first
    assert items[0] == {
        "id": key.pk,
        "name": "ERP sync",
        "prefix": key.prefix,
        "role": "viewer",
        "created_at": items[0]["created_at"],
        "last_used_at": None,
        "revoked_at": None,
    }
    assert items[1]["last_used_at"] is not None  # the key making this request
    assert secret not in response.content.decode()
    assert key.secret_hash not in response.content.decode()


def test_create_returns_the_secret_once_and_it_works_with_its_role(owner_a):
    response = owner_a.post(LIST_URL, {"name": "  Reporting  ", "role": "viewer"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Reporting"
    assert body["role"] == "viewer"
    assert body["secret"].startswith(f"gd_{body['prefix']}_")
    key = ApiKey.objects.unscoped("test checks the database directly").get(pk=body["id"])
    assert key.matches(body["secret"])
    assert key.created_by is None

    new = api_for(body["secret"])
    assert new.get(reverse("api-conversation-list")).status_code == 200
    assert_error(new.get(LIST_URL), 403, "permission_denied")  # viewer cannot manage keys
    # never shown again
    listing = owner_a.get(LIST_URL).content.decode()
    assert body["secret"] not in listing


def test_create_defaults_to_the_viewer_role(owner_a):
    body = owner_a.post(LIST_URL, {"name": "no role given"}, format="json").json()
    assert body["role"] == "viewer"


def test_create_from_a_session_records_the_creator(client_a):
    api = session_for(client_a, Role.ADMIN)
    response = api.post(LIST_URL, {"name": "by a person", "role": "agent"}, format="json")
    assert response.status_code == 201
    assert (
        ApiKey.objects.unscoped("test checks the database directly")
        .get(pk=response.json()["id"])
        .created_by
        == api.staff_user
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ok", "role": "superuser"}, "role"),
        ({"name": "ok", "role": None}, "role"),
    ],
)
def test_create_validates(owner_a, client_a, body, field):
    before = ApiKey.objects.unscoped("test checks the database directly").count()
    error = assert_error(owner_a.post(LIST_URL, body, format="json"), 400, "invalid")
    assert set(error["fields"]) == {field}
    assert ApiKey.objects.unscoped("test checks the database directly").count() == before


@pytest.mark.parametrize("kind", ["api_key", "session"])
def test_an_admin_cannot_grant_more_than_admin(client_a, kind):
    api = key_for(client_a, Role.ADMIN) if kind == "api_key" else session_for(client_a, Role.ADMIN)
    before = ApiKey.objects.unscoped("test checks the database directly").count()
    error = assert_error(api.post(LIST_URL, {"name": "x", "role": "owner"}, format="json"), 403)
    assert "owner" in error["message"]
    assert ApiKey.objects.unscoped("test checks the database directly").count() == before
    assert api.post(LIST_URL, {"name": "x", "role": "admin"}, format="json").status_code == 201


def test_an_owner_may_grant_owner(owner_a):
    response = owner_a.post(LIST_URL, {"name": "x", "role": "owner"}, format="json")
    assert response.status_code == 201


def test_revoke_stops_the_key_at_once(client_a, owner_a):
    key, secret = api_key_issue(client=client_a, name="old", role=Role.VIEWER)
    assert api_for(secret).get(reverse("api-conversation-list")).status_code == 200
    response = owner_a.post(revoke_url(key.pk))
    assert response.status_code == 200
    assert response.json()["revoked_at"] is not None
    assert "secret" not in response.json()
    assert_error(api_for(secret).get(reverse("api-conversation-list")), 401)


def test_revoking_twice_is_idempotent(client_a, owner_a):
    key, _ = api_key_issue(client=client_a, name="old", role=Role.VIEWER)
    first = owner_a.post(revoke_url(key.pk)).json()
    second = owner_a.post(revoke_url(key.pk))
    assert second.status_code == 200
    assert second.json() == first


def test_an_admin_cannot_revoke_an_owner_key(client_a):
    owner_key, _ = api_key_issue(client=client_a, name="owner", role=Role.OWNER)
    admin = key_for(client_a, Role.ADMIN)
    assert_error(admin.post(revoke_url(owner_key.pk)), 403, "permission_denied")
    owner_key.refresh_from_db()
    assert owner_key.revoked_at is None


def test_a_key_may_revoke_itself(client_a):
    key, secret = api_key_issue(client=client_a, name="self", role=Role.ADMIN)
    api = api_for(secret)
    assert api.post(revoke_url(key.pk)).status_code == 200
    assert_error(api.get(LIST_URL), 401)


@pytest.mark.parametrize("key_id", ["999999", "nope", "0", "9" * 40])
def test_revoke_unknown_key_is_404(owner_a, key_id):
    assert_error(owner_a.post(revoke_url(key_id)), 404, "not_found")
