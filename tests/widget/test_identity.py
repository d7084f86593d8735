"""Identity verification on the widget's "start a conversation" (docs/widget.md "Identity
verification"): a signed customer id (HMAC) or a short-lived JWT makes the conversation's
customer verified; anything forged, expired, unsigned or replayed leaves it anonymous — with the
reason in `identity.error`, never a 500 — and a verified customer's open conversation follows
them to another device."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from datetime import timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.utils import timezone

from apps.clients.identity import client_identity_secret_rotate, user_hash
from apps.conversations.models import Conversation, ConversationStatus
from tests.widget.conftest import API, Widget

pytestmark = pytest.mark.django_db


def stored(body: dict[str, Any]) -> Conversation:
    return Conversation.objects.unscoped("test reads the row").get(public_id=body["id"])


@pytest.fixture
def secret(shop) -> str:
    return client_identity_secret_rotate(client=shop)


def token(secret: str, **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "cust-1", "exp": now + 600, "iat": now} | claims
    return jwt.encode({k: v for k, v in body.items() if v is not None}, secret, algorithm="HS256")


def start(widget: Widget, body: dict[str, Any], status: int = 201) -> dict[str, Any]:
    response = widget.start(body)
    assert response.status_code == status, response.content
    answer = response.json()
    grant = answer["identity"].pop("grant", None)  # only when verified
    assert (grant is not None) == answer["identity"]["verified"]
    answer["grant"] = grant
    return answer


def test_a_signed_id_verifies_the_customer(widget, secret):
    body = start(widget, {"customer_id": "cust-1", "user_hash": user_hash(secret, "cust-1")})
    assert body["identity"] == {"verified": True, "customer_id": "cust-1", "error": None}
    conversation = stored(body)
    assert conversation.customer_verified
    assert (conversation.customer_id, conversation.customer_verified_via) == ("cust-1", "hmac")
    # Only the id is signed with an HMAC: an e-mail sent alongside is not believed.
    body = start(
        widget,
        {"customer_id": "cust-2", "user_hash": user_hash(secret, "cust-2"), "email": "x@y.z"},
    )
    assert stored(body).customer_email == ""


def test_a_jwt_verifies_the_customer_with_email_and_name(widget, secret):
    signed = token(secret, email="ann@example.com", name="Ann", jti=str(uuid.uuid4()))
    body = start(widget, {"identity_token": signed})
    assert body["identity"]["verified"] is True
    conversation = stored(body)
    assert (conversation.customer_email, conversation.customer_name) == ("ann@example.com", "Ann")
    assert conversation.customer_verified_via == "jwt"


def test_an_rs256_jwt_verifies_with_the_clients_public_key(widget, shop):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    shop.identity_public_key = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    shop.save()
    now = int(time.time())
    signed = jwt.encode({"sub": "cust-9", "exp": now + 300}, key, algorithm="RS256")
    body = start(widget, {"identity_token": signed})
    assert body["identity"] == {"verified": True, "customer_id": "cust-9", "error": None}
    # Algorithm confusion: an HS256 token "signed" with the public key as an HMAC secret.
    forged = _hs256_by_hand({"sub": "cust-9", "exp": now + 300}, shop.identity_public_key)
    body = start(widget, {"identity_token": forged})
    assert body["identity"] == {"verified": False, "customer_id": "", "error": "not_configured"}


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _hs256_by_hand(claims: dict[str, Any], key: str) -> str:
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    mac = hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def _none_token() -> str:
    now = int(time.time())
    return jwt.encode({"sub": "cust-1", "exp": now + 600}, key=None, algorithm="none")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("forged_hash", "bad_signature"),
        ("hash_of_another_id", "bad_signature"),
        ("no_hash", "missing_signature"),
        ("wrong_secret_jwt", "bad_signature"),
        ("alg_none", "alg_not_allowed"),
        ("hs512", "alg_not_allowed"),
        ("expired", "expired"),
        ("no_exp", "missing_claim"),
        ("no_sub", "missing_claim"),
        ("week_long", "lifetime_too_long"),
        ("garbage", "malformed"),
        ("tampered", "bad_signature"),
    ],
)
def test_a_bad_signature_leaves_the_visitor_anonymous(widget, secret, case, expected):
    now = int(time.time())
    bodies: dict[str, dict[str, Any]] = {
        "forged_hash": {"customer_id": "cust-1", "user_hash": "0" * 64},
        "hash_of_another_id": {"customer_id": "cust-1", "user_hash": user_hash(secret, "cust-2")},
        "no_hash": {"customer_id": "cust-1"},
        "wrong_secret_jwt": {"identity_token": token("idsec_not-the-clients-secret-at-all-xx")},
        "alg_none": {"identity_token": _none_token()},
        "hs512": {
            "identity_token": jwt.encode(
                {"sub": "cust-1", "exp": now + 60}, secret, algorithm="HS512"
            )
        },
        "expired": {"identity_token": token(secret, exp=now - 3600, iat=now - 4000)},
        "no_exp": {"identity_token": token(secret, exp=None)},
        "no_sub": {"identity_token": token(secret, sub=None)},
        "week_long": {"identity_token": token(secret, exp=now + 7 * 86400)},
        "garbage": {"identity_token": "not.a.jwt"},
        "tampered": {
            "identity_token": (lambda t: t[:-3] + ("AAA" if t[-3:] != "AAA" else "BBB"))(
                token(secret)
            )
        },
    }
    body = start(widget, bodies[case])
    assert body["identity"] == {"verified": False, "customer_id": "", "error": expected}
    conversation = stored(body)
    assert not conversation.customer_verified
    assert conversation.customer_id == "" and conversation.customer_verified_at is None


def test_a_jti_is_accepted_once(widget, secret):
    signed = token(secret, jti="page-load-1")
    assert start(widget, {"identity_token": signed})["identity"]["verified"] is True
    again = start(widget, {"identity_token": signed})
    assert again["identity"] == {"verified": False, "customer_id": "", "error": "replayed"}


def test_without_an_identity_secret_nothing_verifies(widget):
    body = start(widget, {"customer_id": "cust-1", "user_hash": "ab" * 32})
    assert body["identity"]["error"] == "not_configured"


def test_rotation_new_secret_verifies_and_the_old_one_for_the_grace_period(widget, shop, secret):
    new = client_identity_secret_rotate(client=shop)
    assert new != secret
    for key in (new, secret):  # both during the grace period
        body = start(widget, {"customer_id": "c", "user_hash": user_hash(key, "c")})
        assert body["identity"]["verified"] is True
    # After the grace period, only the new one.
    shop.identity_previous_secret_expires_at = timezone.now() - timedelta(seconds=1)
    shop.save()
    old = start(widget, {"customer_id": "d", "user_hash": user_hash(secret, "d")})
    assert old["identity"]["error"] == "bad_signature"
    assert start(widget, {"customer_id": "d", "user_hash": user_hash(new, "d")})["identity"][
        "verified"
    ]


def test_immediate_rotation_drops_the_old_secret(widget, shop, secret):
    client_identity_secret_rotate(client=shop, grace=timedelta(0))
    body = start(widget, {"customer_id": "c", "user_hash": user_hash(secret, "c")})
    assert body["identity"]["error"] == "bad_signature"


def test_client_bs_secret_never_verifies_for_client_a(widget, shop, secret, client_b):
    secret_b = client_identity_secret_rotate(client=client_b)
    body = start(widget, {"customer_id": "c", "user_hash": user_hash(secret_b, "c")})
    assert body["identity"]["error"] == "bad_signature"
    body = start(widget, {"identity_token": token(secret_b)})
    assert body["identity"]["error"] == "bad_signature"


def test_a_verified_customer_resumes_their_open_conversation_on_another_device(widget, secret):
    signed = {"customer_id": "cust-7", "user_hash": user_hash(secret, "cust-7")}
    first = start(widget, signed)
    laptop_token = first["token"]
    phone = start(widget, signed)  # another device, same verified customer
    assert phone["id"] == first["id"] and phone["resumed"] is True
    # Both devices can read the conversation; neither logs the other out.
    for device_token in (laptop_token, phone["token"]):
        assert widget.messages(first["id"], device_token).status_code == 200
    # An anonymous visitor never resumes anyone's conversation.
    anonymous = start(widget, {"customer_id": "cust-7"})
    assert anonymous["id"] != first["id"] and anonymous["resumed"] is False
    # A closed conversation is not resumed: a new one starts.
    conversation = stored(first)
    conversation.status = ConversationStatus.CLOSED
    conversation.save()
    again = start(widget, signed)
    assert again["id"] != first["id"] and again["resumed"] is False


def test_the_customer_token_does_not_open_another_conversation(widget, secret):
    first = start(widget, {"customer_id": "a1", "user_hash": user_hash(secret, "a1")})
    other = start(widget, {"customer_id": "b2", "user_hash": user_hash(secret, "b2")})
    assert widget.messages(other["id"], first["token"]).status_code == 404


def test_tenant_b_cannot_resume_tenant_as_customer(widget, shop, secret, client_b):
    first = start(widget, {"customer_id": "cust-7", "user_hash": user_hash(secret, "cust-7")})
    client_b.allowed_origins = ["https://b.example"]
    client_b.save()
    widget_b = Widget(client_b)
    secret_b = client_identity_secret_rotate(client=client_b)
    body = start(widget_b, {"customer_id": "cust-7", "user_hash": user_hash(secret_b, "cust-7")})
    assert body["id"] != first["id"] and body["resumed"] is False
    assert widget_b.messages(first["id"], first["token"]).status_code in (401, 403, 404)
    assert stored(first).client_id == shop.pk


def test_start_with_identity_fields_of_the_wrong_type_is_a_400(widget):
    response = widget.http.post(
        f"{API}conversations",
        {"identity_token": {"a": 1}},
        format="json",
        headers=widget.headers(),
    )
    assert response.status_code == 400


def test_resume_only_creates_nothing_and_the_grant_starts_the_conversation_later(widget, secret):
    signed = token(secret, sub="cust-5", jti="one-page-view")
    check = start(widget, {"identity_token": signed, "resume_only": True}, status=200)
    assert check["id"] is None and check["token"] is None
    assert check["identity"]["verified"] is True and check["grant"]
    assert not Conversation.objects.for_client(widget.client).exists()
    # The single-use token is spent; the grant starts the conversation when the customer writes.
    first = start(widget, {"identity_grant": check["grant"]})
    assert first["identity"] == {"verified": True, "customer_id": "cust-5", "error": None}
    assert stored(first).customer_verified_via == "jwt"
    # …and, on another device's check, the open conversation is resumed.
    other = start(widget, {"identity_token": token(secret, sub="cust-5"), "resume_only": True})
    assert other["id"] == first["id"] and other["resumed"] is True
    # "New chat" starts another one for the same customer.
    fresh = start(widget, {"identity_grant": check["grant"], "new": True})
    assert fresh["id"] != first["id"] and stored(fresh).customer_id == "cust-5"


def test_a_forged_or_foreign_grant_is_refused(widget, shop, secret, client_b):
    from apps.clients.identity import Identity, identity_grant_issue

    for_b = identity_grant_issue(
        client=client_b, identity=Identity(customer_id="x", email="", name="", via="hmac")
    )
    body = start(widget, {"identity_grant": for_b})
    assert body["identity"] == {"verified": False, "customer_id": "", "error": "bad_signature"}
    body = start(widget, {"identity_grant": "not-a-grant"})
    assert body["identity"]["error"] == "bad_signature"


def test_resume_only_for_an_anonymous_visitor_creates_nothing(widget, secret):
    body = start(widget, {"customer_id": "c", "user_hash": "0" * 64, "resume_only": True}, 200)
    assert body["id"] is None and body["identity"]["error"] == "bad_signature"
    assert not Conversation.objects.for_client(widget.client).exists()


def test_resuming_with_an_hmac_keeps_the_email_a_jwt_vouched_for(widget, secret):
    first = start(widget, {"identity_token": token(secret, sub="c9", email="c9@example.com")})
    again = start(widget, {"customer_id": "c9", "user_hash": user_hash(secret, "c9")})
    assert again["id"] == first["id"] and again["resumed"] is True
    conversation = stored(first)
    assert conversation.customer_email == "c9@example.com"
    assert conversation.customer_verified_via == "hmac"


def test_no_resume_when_the_client_keeps_conversations_only_while_the_tab_is_open(
    widget, shop, secret
):
    shop.remember_conversation_hours = 0
    shop.save(update_fields=["remember_conversation_hours"])
    signed = {"customer_id": "c0", "user_hash": user_hash(secret, "c0")}
    first = start(widget, signed)
    again = start(widget, signed)
    assert again["id"] != first["id"] and again["resumed"] is False
