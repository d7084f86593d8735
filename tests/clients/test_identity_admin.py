"""The identity secret in the admin (docs/widget.md "Identity verification"): generated and shown
once, never on the page again; a rotation keeps the old secret for the grace period (or drops it
at once); a bad public key is refused; another client's staff cannot see or rotate it. And the
tenant file: `identity` and `customer_scoped`, the secret printed once."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from apps.clients.identity import active_identity_secrets
from apps.provisioning.services import client_export, tenant_import
from apps.tools.models import ClientTool
from tests.clients.helpers import one_shop_tenant
from tests.factories import ClientFactory, MembershipFactory, PlanFactory, UserFactory
from tests.support.admin_forms import client_form

pytestmark = pytest.mark.django_db


def post(http, shop, **fields):
    url = reverse("admin:clients_client_change", args=[shop.pk])
    page = http.get(url).content.decode()
    blank = {"playground_max_iterations": "", "identity_public_key": "", "signin_url": ""}
    data = client_form(page, shop, **(blank | fields))
    return http.post(url, data, follow=True)


def shown_secrets(html: str) -> list[str]:
    return re.findall(r"idsec_[A-Za-z0-9_-]{20,}", html)


def test_a_generated_secret_is_shown_once_and_rotation_keeps_the_old_one_a_day(admin_client):
    shop = ClientFactory(plan=PlanFactory())
    url = reverse("admin:clients_client_change", args=[shop.pk])
    assert "No identity secret yet" in admin_client.get(url).content.decode()
    response = post(admin_client, shop, identity_secret_action="rotate")
    shop.refresh_from_db()
    assert shown_secrets(response.content.decode()) == [shop.identity_secret]  # once, here
    first = shop.identity_secret
    page = admin_client.get(url).content.decode()
    assert first not in page and "Identity secret set." in page

    response = post(admin_client, shop, identity_secret_action="rotate")
    shop.refresh_from_db()
    second = shop.identity_secret
    assert second != first and shown_secrets(response.content.decode()) == [second]
    assert active_identity_secrets(shop) == [second, first]  # both, for the grace period
    assert "the previous one also works until" in admin_client.get(url).content.decode()
    later = timezone.now() + timedelta(hours=25)
    assert active_identity_secrets(shop, now=later) == [second]

    post(admin_client, shop, identity_secret_action="rotate_now")
    shop.refresh_from_db()
    assert active_identity_secrets(shop) == [shop.identity_secret]
    # Saving without the action changes nothing.
    before = shop.identity_secret
    post(admin_client, shop, greeting="Hello")
    shop.refresh_from_db()
    assert shop.identity_secret == before


def test_a_bad_public_key_is_refused(admin_client):
    shop = ClientFactory(plan=PlanFactory())
    response = post(admin_client, shop, identity_public_key="not a key")
    assert "RSA public key in PEM form" in response.content.decode()
    shop.refresh_from_db()
    assert shop.identity_public_key == ""


def test_another_clients_staff_cannot_see_or_rotate_the_secret(client):
    mine = ClientFactory(plan=PlanFactory(), name="Mine Shop")
    other = ClientFactory(plan=mine.plan, name="Other Shop", identity_secret="idsec_" + "x" * 40)
    member = MembershipFactory(client=mine, user=UserFactory(is_superuser=False, is_staff=True))
    member.user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_client", "change_client"])
    )
    client.force_login(member.user)
    url = reverse("admin:clients_client_change", args=[other.pk])
    assert client.get(url).status_code == 302
    response = client.post(url, {"identity_secret_action": "rotate"})
    assert response.status_code in (302, 403, 404)
    other.refresh_from_db()
    assert other.identity_secret == "idsec_" + "x" * 40


def tenant_file(**client_extra):
    cancel_order = {
        "name": "cancel_order",
        "description": "Cancel an order.",
        "kind": "destructive",
        "customer_scoped": True,
        "executor": {"type": "builtin", "handler": "demo.cancel_order"},
    }
    return one_shop_tenant("p", slug="idshop", name="Id Shop", tools=[cancel_order], **client_extra)


def test_the_tenant_file_takes_identity_and_customer_scoped(tmp_path):
    data = tenant_file(
        identity={"generate_secret": True, "signin_url": "https://idshop.example/login"}
    )
    path = tmp_path / "tenant.json"
    path.write_text(json.dumps(data))
    out = io.StringIO()
    call_command("import_client", str(path), stdout=out)
    [printed] = json.loads(out.getvalue())["clients"]
    secret = printed["identity_secret"]
    assert secret.startswith("idsec_")
    imported = tenant_import(data=data)  # again: the secret is kept, and not printed
    assert imported[0].identity_secret is None
    from apps.clients.models import Client

    shop = Client.objects.get(slug="idshop")
    assert shop.identity_secret == secret and shop.signin_url == "https://idshop.example/login"
    tool = ClientTool.objects.for_client(shop).get(name="cancel_order")
    assert tool.customer_scoped is True
    exported = client_export(client=shop)
    assert exported["identity"] == {"public_key": "", "signin_url": "https://idshop.example/login"}
    assert secret not in json.dumps(exported)


def test_the_tenant_file_refuses_a_bad_public_key():
    from apps.core.exceptions import ApplicationError

    with pytest.raises(ApplicationError):
        tenant_import(data=tenant_file(identity={"public_key": "nope"}))
