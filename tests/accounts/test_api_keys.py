import pytest
from django.urls import reverse

from apps.accounts.models import ApiKey, Role, hash_api_secret
from apps.accounts.services import api_key_issue, api_key_revoke
from tests.conftest import api_for
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db
URL = reverse("api-current-client")


def test_secret_is_stored_hashed_and_prefix_shown(client_a):
    key, secret = api_key_issue(client=client_a, name="back office")
    key.refresh_from_db()
    assert secret.startswith(f"gd_{key.prefix}_")
    assert key.secret_hash == hash_api_secret(secret)
    assert secret not in str(
        ApiKey.objects.unscoped("test checks the database directly")
        .filter(pk=key.pk)
        .values()
        .get()
    )
    assert key.matches(secret)
    assert not key.matches(secret + "x")


def test_good_key_authenticates_as_its_client(client_a, key_a):
    response = api_for(key_a).get(URL)
    assert response.status_code == 200
    assert response.json()["slug"] == "acme"
    assert ApiKey.objects.get(client=client_a).last_used_at is not None


def test_each_key_sees_only_its_own_client(client_a, client_b, key_a, key_b):
    assert api_for(key_a).get(URL).json()["slug"] == "acme"
    assert api_for(key_b).get(URL).json()["slug"] == "globex"
    # client= cannot switch tenants for an API key
    assert api_for(key_b).get(URL, {"client": "acme"}).json()["slug"] == "globex"


@pytest.mark.parametrize(
    "header",
    ["Api-Key gd_deadbeef_nope", "Api-Key not-a-key", "Api-Key ", "Bearer whatever"],
)
def test_wrong_or_malformed_key_is_401(api, key_a, header):
    response = api.get(URL, HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert set(response.json()["error"]) >= {"code", "message"}


def test_right_prefix_wrong_secret_is_401(api, key_a):
    tampered = key_a[:-3] + ("aaa" if not key_a.endswith("aaa") else "bbb")
    response = api.get(URL, HTTP_AUTHORIZATION=f"Api-Key {tampered}")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid API key."


def test_revoked_key_is_401(client_a):
    key, secret = api_key_issue(client=client_a, name="old")
    api_key_revoke(client=client_a, api_key=key)
    response = api_for(secret).get(URL)
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_revoking_with_another_client_is_refused(client_a, client_b):
    key, _ = api_key_issue(client=client_a, name="a")
    with pytest.raises(ValueError, match="another client"):
        api_key_revoke(client=client_b, api_key=key)
    key.refresh_from_db()
    assert key.revoked_at is None


def test_inactive_client_key_is_401(client_a, key_a):
    client_a.is_active = False
    client_a.save()
    assert api_for(key_a).get(URL).status_code == 401


def test_no_credentials_is_401_with_one_error_shape(api):
    response = api.get(URL)
    assert response.status_code in {401, 403}
    assert response.json()["error"]["code"] == "not_authenticated"


def test_staff_session_uses_membership(api, client_a, client_b):
    member = MembershipFactory(client=client_b, role=Role.VIEWER)
    api.force_login(member.user)
    assert api.get(URL).json()["slug"] == "globex"
    # a slug the user has no membership for does not switch tenants
    assert api.get(URL, {"client": "acme"}).status_code == 403


def test_staff_without_membership_is_403(api, client_a):
    api.force_login(UserFactory())
    assert api.get(URL).status_code == 403


def test_garbage_client_slug_for_a_session_is_403_not_500(api, client_a):
    member = MembershipFactory(client=client_a, role=Role.VIEWER)
    api.force_login(member.user)
    assert api.get(URL, {"client": "acme\x00"}).status_code == 403
    assert api.get(URL, {"client": "x" * 500}).status_code == 403
