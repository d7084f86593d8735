"""MFA required per client (`Client.require_mfa`) and for superusers
(`MFA_REQUIRED_FOR_SUPERUSERS`): until such a user has set up TOTP, the admin and the console
redirect to allauth's set-up page and the staff API answers a JSON 403; signing in with a real
TOTP code works as before."""

from __future__ import annotations

import time

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal.auth import (
    SECRET_SESSION_KEY,
    TOTP,
    format_hotp_value,
    generate_totp_secret,
    hotp_value,
)
from django.contrib.auth.models import Permission
from django.urls import reverse

from apps.accounts.models import Role
from apps.accounts.services import api_key_issue
from apps.clients.models import Client
from apps.provisioning.services import tenant_import
from tests.factories import ClientFactory, MembershipFactory, UserFactory
from tests.support.tenant_files import one_client_tenant

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-123"
SETUP_URL = "/accounts/2fa/totp/activate/"


def current_code(secret: str, steps: int = 0) -> str:
    """The authenticator app's code now, or `steps` 30-second steps away from now."""
    return format_hotp_value(hotp_value(secret, int(time.time()) // 30 + steps))


def sign_in(client, user) -> None:
    response = client.post("/accounts/login/", {"login": user.email, "password": PASSWORD})
    assert response.status_code == 302


def staff_pages(client, acme) -> dict[str, int]:
    return {
        "admin": client.get("/admin/").status_code,
        "console": client.get(f"/console/?client={acme.slug}").status_code,
        "api": client.get(f"/api/v1/conversations/?client={acme.slug}").status_code,
    }


@pytest.fixture
def acme(db):
    return ClientFactory(name="Acme Shop")


@pytest.fixture
def mfa_for_superusers(settings):
    settings.MFA_REQUIRED_FOR_SUPERUSERS = True


def test_a_superuser_without_totp_is_sent_to_set_it_up_then_works(client, acme, mfa_for_superusers):
    operator = UserFactory(is_superuser=True)
    sign_in(client, operator)

    admin_page = client.get("/admin/")
    assert admin_page.status_code == 302 and admin_page["Location"] == SETUP_URL
    console_page = client.get(f"/console/?client={acme.slug}")
    assert console_page.status_code == 302 and console_page["Location"] == SETUP_URL
    api = client.get(f"/api/v1/conversations/?client={acme.slug}")
    assert api.status_code == 403
    assert api.json()["error"]["code"] == "mfa_required"
    assert "/accounts/2fa/totp/activate/" in api.json()["error"]["message"]
    poll = client.get(reverse("console-queue-poll") + f"?client={acme.slug}")
    assert poll.status_code == 403 and poll.json()["error"]["code"] == "mfa_required"

    # Set up TOTP through allauth's own page, with a real code from the offered secret.
    page = client.get(SETUP_URL, follow=True)
    if page.redirect_chain:  # allauth may ask for the password again first
        client.post("/accounts/reauthenticate/", {"password": PASSWORD})
        page = client.get(SETUP_URL)
    assert page.status_code == 200
    secret = client.session[SECRET_SESSION_KEY]
    response = client.post(SETUP_URL, {"code": current_code(secret)})
    assert response.status_code == 302
    assert Authenticator.objects.filter(user=operator, type=Authenticator.Type.TOTP).exists()

    assert staff_pages(client, acme) == {"admin": 200, "console": 200, "api": 200}


def test_a_user_with_totp_signs_in_with_the_code_as_before(client, acme, mfa_for_superusers):
    operator = UserFactory(is_superuser=True)
    secret = generate_totp_secret()
    TOTP.activate(operator, secret)
    sign_in(client, operator)
    assert client.get("/admin/").status_code == 302  # not signed in before the code
    response = client.post("/accounts/2fa/authenticate/", {"code": current_code(secret)})
    assert response.status_code == 302
    assert staff_pages(client, acme) == {"admin": 200, "console": 200, "api": 200}


@pytest.mark.parametrize(("steps", "accepted"), [(-1, True), (1, True), (-2, False), (2, False)])
def test_a_code_from_the_step_either_side_is_taken_and_no_further(
    client, acme, mfa_for_superusers, steps, accepted
):
    """Typed as the 30-second step turns over (or with the phone's clock a little off), the
    code is still good; two steps away it is not."""
    operator = UserFactory(is_superuser=True)
    secret = generate_totp_secret()
    TOTP.activate(operator, secret)
    sign_in(client, operator)
    client.post("/accounts/2fa/authenticate/", {"code": current_code(secret, steps)})
    assert (client.get("/admin/").status_code == 200) is accepted


def test_superusers_need_no_totp_when_the_setting_is_off(client, acme, settings):
    settings.MFA_REQUIRED_FOR_SUPERUSERS = False
    sign_in(client, UserFactory(is_superuser=True))
    assert staff_pages(client, acme) == {"admin": 200, "console": 200, "api": 200}


def test_the_setting_defaults_on_in_production_and_off_in_the_demo():
    import config.settings.base as base
    import config.settings.local as local

    assert base.MFA_REQUIRED_FOR_SUPERUSERS is True
    assert local.MFA_REQUIRED_FOR_SUPERUSERS is False


def test_a_client_can_require_mfa_of_its_staff(client, acme):
    globex = ClientFactory(name="Globex Shop")
    acme.require_mfa = True
    acme.save()
    agent = MembershipFactory(client=acme, role=Role.AGENT).user
    sign_in(client, agent)
    assert staff_pages(client, acme) == {"admin": 302, "console": 302, "api": 403}
    assert client.get("/admin/")["Location"] == SETUP_URL

    # Another client's staff are not affected...
    other = MembershipFactory(client=globex, role=Role.AGENT).user
    client.logout()
    sign_in(client, other)
    assert staff_pages(client, globex) == {"admin": 200, "console": 200, "api": 200}

    # ...and once the agent has TOTP, they sign in with the code and work.
    secret = generate_totp_secret()
    TOTP.activate(agent, secret)
    client.logout()
    sign_in(client, agent)
    client.post("/accounts/2fa/authenticate/", {"code": current_code(secret)})
    assert staff_pages(client, acme) == {"admin": 200, "console": 200, "api": 200}


def test_api_keys_and_the_widget_are_not_affected(client, acme, mfa_for_superusers):
    acme.require_mfa = True
    acme.save()
    _, secret = api_key_issue(client=acme, name="erp", role=Role.VIEWER)
    response = client.get("/api/v1/conversations/", HTTP_AUTHORIZATION=f"Api-Key {secret}")
    assert response.status_code == 200


def test_require_mfa_is_set_in_the_admin_and_the_importer(client, acme):
    owner = MembershipFactory(client=acme, role=Role.ADMIN).user
    owner.user_permissions.add(*Permission.objects.filter(codename__in=["change_client"]))
    client.force_login(owner)
    page = client.get(reverse("admin:clients_client_change", args=[acme.pk])).content.decode()
    assert 'name="require_mfa"' in page

    tenant_import(data=one_client_tenant("mfa-shop", name="MFA Shop", require_mfa=True))
    assert Client.objects.get(slug="mfa-shop").require_mfa is True
