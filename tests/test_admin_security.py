"""The admin enforces the same rules as the API for client staff (non-superusers): their own
tenants only, no platform-wide accounts, and no granting more than their role holds."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import ApiKey, Membership, Role
from apps.accounts.services import api_key_issue
from tests.factories import ClientFactory, MembershipFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db


def staff_of(client, role, *codenames):
    member = MembershipFactory(client=client, role=role, user=UserFactory(is_staff=True))
    member.user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return member.user


@pytest.fixture
def tenants(db):
    plan = PlanFactory()
    return ClientFactory(plan=plan, name="Acme Shop"), ClientFactory(plan=plan, name="Globex Shop")


def test_client_staff_cannot_manage_user_accounts(client, tenants):
    acme, globex = tenants
    victim = MembershipFactory(client=globex, role=Role.OWNER).user
    staff = staff_of(acme, Role.OWNER, "view_user", "change_user")
    client.force_login(staff)
    assert client.get(reverse("admin:accounts_user_changelist")).status_code == 403
    response = client.post(
        f"/admin/accounts/user/{victim.pk}/password/",
        {"password1": "Hijacked-pass-123", "password2": "Hijacked-pass-123"},
    )
    assert response.status_code in {403, 404}
    victim.refresh_from_db()
    assert not victim.check_password("Hijacked-pass-123")


def test_a_viewer_cannot_mint_or_raise_keys_in_the_admin(client, tenants):
    acme, _ = tenants
    viewer = staff_of(acme, Role.VIEWER, "add_apikey", "change_apikey", "view_apikey")
    client.force_login(viewer)
    response = client.post(
        reverse("admin:accounts_apikey_add"), {"client": acme.pk, "name": "x", "role": "owner"}
    )
    assert response.status_code == 403
    assert not ApiKey.objects.unscoped("test checks the database directly").exists()


def test_an_admin_cannot_mint_an_owner_key_but_can_mint_an_agent_key(client, tenants):
    acme, _ = tenants
    admin_user = staff_of(acme, Role.ADMIN, "add_apikey", "view_apikey", "change_apikey")
    client.force_login(admin_user)
    url = reverse("admin:accounts_apikey_add")
    assert client.post(url, {"client": acme.pk, "name": "o", "role": "owner"}).status_code == 403
    assert client.post(url, {"client": acme.pk, "name": "a", "role": "agent"}).status_code == 302
    assert list(
        ApiKey.objects.unscoped("test checks the database directly").values_list("role", flat=True)
    ) == ["agent"]


def test_revoking_needs_change_permission_and_enough_role(client, tenants):
    acme, _ = tenants
    owner_key, _ = api_key_issue(client=acme, name="owner", role=Role.OWNER)
    viewer = staff_of(acme, Role.VIEWER, "view_apikey")
    client.force_login(viewer)
    client.post(
        reverse("admin:accounts_apikey_changelist"),
        {"action": "revoke", "_selected_action": [owner_key.pk]},
    )
    owner_key.refresh_from_db()
    assert owner_key.revoked_at is None


def test_list_filters_do_not_name_other_tenants(client, tenants):
    acme, _ = tenants
    api_key_issue(client=acme, name="k")
    staff = staff_of(acme, Role.ADMIN, "view_apikey", "view_membership", "view_usagerecord")
    client.force_login(staff)
    for name in ["accounts_apikey", "accounts_membership", "billing_usagerecord"]:
        body = client.get(reverse(f"admin:{name}_changelist")).content.decode()
        assert "Globex Shop" not in body, name


def test_memberships_are_not_editable_by_client_staff(client, tenants):
    acme, _ = tenants
    owner = staff_of(acme, Role.VIEWER, "view_membership", "change_membership")
    client.force_login(owner)
    membership = Membership.objects.unscoped("a user's memberships").get(user=owner)
    response = client.post(
        reverse("admin:accounts_membership_change", args=[membership.pk]),
        {"client": acme.pk, "user": owner.pk, "role": "owner"},
    )
    assert response.status_code == 403
    membership.refresh_from_db()
    assert membership.role == Role.VIEWER


def test_usage_admin_bad_id_is_404(client):
    client.force_login(UserFactory(is_superuser=True))
    assert client.get("/admin/billing/clientusage/abc/change/").status_code == 404
