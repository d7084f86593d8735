import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import ApiKey
from tests.factories import ClientFactory, PlanFactory, UserFactory
from tests.support.admin_forms import client_form

pytestmark = pytest.mark.django_db


def test_admin_login_goes_through_allauth(client):
    response = client.get("/admin/login/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_email_login_then_totp_setup_is_offered(client):
    assert client.get("/accounts/login/").status_code == 200
    user = UserFactory()
    response = client.post(
        "/accounts/login/", {"login": user.email, "password": "pw-for-tests-123"}
    )
    assert response.status_code == 302
    page = client.get("/accounts/2fa/totp/activate/", follow=True)
    if page.redirect_chain:  # allauth asks for the password again before security changes
        client.post("/accounts/reauthenticate/", {"password": "pw-for-tests-123"})
        page = client.get("/accounts/2fa/totp/activate/")
    assert page.status_code == 200
    assert "Authenticator" in page.content.decode()


def test_login_with_totp_enabled_asks_for_the_code(client):
    from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret

    from tests.accounts.test_mfa_required import current_code

    user = UserFactory(is_superuser=True)
    secret = generate_totp_secret()
    TOTP.activate(user, secret)
    response = client.post(
        "/accounts/login/", {"login": user.email, "password": "pw-for-tests-123"}
    )
    assert response["Location"] == "/accounts/2fa/authenticate/"
    assert client.get("/admin/").status_code == 302  # not signed in yet
    response = client.post("/accounts/2fa/authenticate/", {"code": current_code(secret)})
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def test_plan_form_explains_modes(admin_client):
    response = admin_client.get(reverse("admin:clients_plan_add"))
    body = response.content.decode()
    assert response.status_code == 200
    for text in ["Standard", "Adaptive", "Deliberative", "critique", "multiplier"]:
        assert text in body


def test_client_admin_edits_business_basics_as_form_fields(admin_client):
    client = ClientFactory(
        plan=PlanFactory(),
        business_info={
            "about": {"description": "Old.", "full": "The long story."},
            "contact": {"phone": "+1 555"},
            "faqs": [{"question": "Hours?", "answer": "9-5"}],
        },
    )
    url = reverse("admin:clients_client_change", args=[client.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="about_description"' in body and "Old." in body
    assert 'name="business_info"' not in body  # the JSON is shown read-only
    data = client_form(
        body,
        client,
        about_description="x" * 1001,
        about_full="The long story.",
        contact_phone="",
        policy_returns="30 days.",
    )
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "at most 1000 characters" in response.content.decode()
    client.refresh_from_db()
    info: Any = client.business_info
    assert info["about"]["description"] == "Old."

    response = admin_client.post(url, {**data, "about_description": "Hiking gear."})
    assert response.status_code == 302, response.context["adminform"].form.errors
    client.refresh_from_db()
    assert client.business_info == {
        "about": {"description": "Hiking gear.", "full": "The long story."},
        "policies": {"returns": "30 days."},
        # a key the form does not show stays as it was
        "faqs": [{"question": "Hours?", "answer": "9-5"}],
    }


def test_api_key_created_in_admin_shows_secret_once(admin_client):
    client = ClientFactory(plan=PlanFactory())
    response = admin_client.post(
        reverse("admin:accounts_apikey_add"),
        {"client": client.pk, "name": "ERP", "role": "viewer"},
        follow=True,
    )
    key = ApiKey.objects.get(client=client)
    body = response.content.decode()
    secret = re.search(rf"gd_{key.prefix}_[\w-]+", body)
    assert secret, body
    assert key.matches(secret.group(0))
    assert key.role == "viewer"
    again = admin_client.get(
        reverse("admin:accounts_apikey_change", args=[key.pk])
    ).content.decode()
    assert secret.group(0) not in again


@pytest.mark.parametrize(
    "name",
    [
        "clients_plan",
        "clients_client",
        "accounts_membership",
        "accounts_apikey",
        "billing_modelprice",
        "accounts_user",
    ],
)
def test_admin_changelists_load(admin_client, name):
    ClientFactory(plan=PlanFactory())
    assert admin_client.get(reverse(f"admin:{name}_changelist")).status_code == 200


def test_home_and_health(client, settings):
    settings.DEMO_PAGE = True  # the demo/local settings (production: tests/core/test_production.py)
    ClientFactory(plan=PlanFactory(), name="Trailhead Outfitters")
    assert "Trailhead Outfitters" in client.get("/").content.decode()
    assert client.get("/healthz").json() == {"ok": True}


def test_client_staff_see_only_their_clients_in_admin(client):
    from tests.factories import MembershipFactory

    mine = ClientFactory(plan=PlanFactory(), name="Mine Shop")
    ClientFactory(plan=mine.plan, name="Other Shop")
    member = MembershipFactory(client=mine, user=UserFactory(is_superuser=False, is_staff=True))
    member.user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_client", "change_client", "view_plan", "change_plan"]
        )
    )
    client.force_login(member.user)
    body = client.get(reverse("admin:clients_client_changelist")).content.decode()
    assert "Mine Shop" in body
    assert "Other Shop" not in body
    other = ClientFactory(plan=mine.plan, name="Third Shop")
    assert client.get(reverse("admin:clients_client_change", args=[other.pk])).status_code == 302
    # plans are the platform's: visible, not editable
    response = client.post(reverse("admin:clients_plan_change", args=[mine.plan.pk]), {})
    assert response.status_code == 403


def test_one_clearly_named_section_for_staff_accounts(admin_client):
    """django-allauth's own "Accounts" section (e-mail addresses) is gone; its rows show on the
    user's page, where an operator can mark the sign-in address verified."""
    from allauth.account.models import EmailAddress

    index = admin_client.get(reverse("admin:index")).content.decode()
    sections = re.findall(r'<caption>\s*<a[^>]*class="section"[^>]*>([^<]+)</a>', index)
    assert "Staff accounts and API keys" in sections
    assert not [s for s in sections if s.strip().lower() == "accounts"], sections
    assert "/admin/account/" not in index

    user = UserFactory(email="agent@acme.example")
    EmailAddress.objects.create(user=user, email=user.email, primary=True, verified=False)
    url = reverse("admin:accounts_user_change", args=[user.pk])
    page = admin_client.get(url).content.decode()
    assert "Sign-in e-mail addresses" in page and "agent@acme.example" in page
