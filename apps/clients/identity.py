"""Verified customer identity (docs/widget.md "Identity verification").

The business's site knows who its signed-in customer is; the widget's visitor is anonymous. The
site's backend vouches for its customer with a signature made with the client's identity secret
(or, for JWTs, an RSA key whose public half the client configured), and only a signature that
verifies here makes a conversation's customer "verified". Two forms, as Intercom's `user_hash`
and Chatwoot's `identifier_hash`, plus a JWT:

* **HMAC** — `user_hash` = hex HMAC-SHA256 of the customer id with the identity secret. Only the
  id is signed: an e-mail or name sent alongside is not trusted and is ignored.
* **JWT** — `identity_token`, HS256 with the identity secret or RS256 with the client's private
  key: `sub` (the customer id), optional `email` and `name`, `exp` required and at most
  `MAX_TOKEN_LIFETIME` ahead (and after `iat`, when given). Any other algorithm (`none`
  included) is refused. A token with a `jti` is accepted once per client.

During a rotation the previous secret verifies until `identity_previous_secret_expires_at`
(`ROTATION_GRACE` after the rotation), so pages signed before it keep working for a day.

Failures are values, not crashes: `IdentityError.code` is the machine-readable reason the widget
API returns (`identity.error`) and the widget logs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.clients.models import Client, IdentityTokenUse

IDENTITY_SECRET_PREFIX = "idsec_"  # noqa: S105 — a prefix, not a secret
# A rotated-out secret keeps verifying this long (pages signed with it, tokens issued).
ROTATION_GRACE = timedelta(hours=24)
# The longest an identity token may live: a short-lived token is one a thief cannot keep.
MAX_TOKEN_LIFETIME = timedelta(hours=24)
# Clock differences between the business's servers and ours.
LEEWAY = timedelta(seconds=60)
MAX_CUSTOMER_ID = 255
MAX_TOKEN_LENGTH = 8192
HS256, RS256 = "HS256", "RS256"


class IdentityError(Exception):
    """Why a signed identity was not accepted. `code` is part of the widget API."""

    CODES = (
        "not_configured",  # the client has no identity secret / key
        "missing_signature",  # a customer id without user_hash
        "bad_signature",  # the HMAC or the JWT signature does not verify
        "malformed",  # not a JWT, or claims of the wrong type
        "alg_not_allowed",  # none, or an algorithm the client has no key for
        "missing_claim",  # no exp or no sub
        "expired",  # past exp
        "lifetime_too_long",  # exp more than MAX_TOKEN_LIFETIME ahead (or after iat)
        "replayed",  # a jti already accepted
    )

    def __init__(self, code: str, detail: str = "") -> None:
        assert code in self.CODES, code
        super().__init__(detail or code)
        self.code = code
        self.detail = detail or code


@dataclass(frozen=True)
class Identity:
    customer_id: str
    email: str
    name: str
    via: str  # CustomerVerification: "hmac" | "jwt"


def identity_secret_generate() -> str:
    return IDENTITY_SECRET_PREFIX + secrets.token_urlsafe(32)


def user_hash(secret: str, customer_id: str) -> str:
    """What the business's backend computes (docs/widget.md has it in Python, Node and PHP)."""
    return hmac.new(secret.encode(), customer_id.encode(), hashlib.sha256).hexdigest()


def active_identity_secrets(client: Client, *, now: datetime | None = None) -> list[str]:
    """The secrets that verify now: the current one and, during a rotation's grace period, the
    previous one."""
    now = now or timezone.now()
    found = [client.identity_secret] if client.identity_secret else []
    expires = client.identity_previous_secret_expires_at
    if client.identity_previous_secret and expires is not None and now < expires:
        found.append(client.identity_previous_secret)
    return found


# The widget's grant: what the chat frame shows for later conversations of the same page view
# (a "New chat"; the first one after a resume check), so a single-use JWT is used once.
GRANT_MAX_AGE = timedelta(hours=1)
_GRANT_SALT = "guidedesk.identity-grant"


def identity_grant_issue(*, client: Client, identity: Identity) -> str:
    """A short-lived grant of a verified identity, signed with the server's SECRET_KEY and
    bound to the client: never to be accepted for another client."""
    payload = [client.pk, identity.customer_id, identity.email, identity.name, identity.via]
    return signing.dumps(payload, salt=_GRANT_SALT, compress=True)


def identity_grant_verify(*, client: Client, grant: str) -> Identity:
    try:
        payload = signing.loads(grant, salt=_GRANT_SALT, max_age=GRANT_MAX_AGE)
    except signing.SignatureExpired:
        raise IdentityError("expired", "the identity grant has expired") from None
    except signing.BadSignature:
        raise IdentityError("bad_signature", "the identity grant does not verify") from None
    if not isinstance(payload, list) or len(payload) != 5 or payload[0] != client.pk:
        raise IdentityError("bad_signature", "the identity grant is for another client")
    _, customer_id, email, name, via = payload
    return Identity(customer_id=customer_id, email=email, name=name, via=via)


def public_key_problem(pem: str) -> str:
    """What is wrong with a configured RS256 public key ('' = nothing)."""
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        key = load_pem_public_key(pem.strip().encode())
    except (ValueError, TypeError) as exc:
        return f"not a PEM public key: {exc}"
    return "" if isinstance(key, RSAPublicKey) else "not an RSA key"


def identity_verify(
    *,
    client: Client,
    customer_id: str = "",
    user_hash_hex: str = "",
    token: str = "",
    now: datetime | None = None,
) -> Identity:
    """The identity the client's signature vouches for, or `IdentityError`. A token wins over
    an id + hash when both are given. Accepting a token with a `jti` records it (once)."""
    now = now or timezone.now()
    if token:
        return _verify_jwt(client=client, token=token, now=now)
    customer_id = str(customer_id or "").strip()
    if not customer_id or len(customer_id) > MAX_CUSTOMER_ID:
        raise IdentityError("malformed", "customer id must be 1-255 characters")
    if not user_hash_hex:
        raise IdentityError("missing_signature", "a customer id needs its user_hash")
    keys = active_identity_secrets(client, now=now)
    if not keys:
        raise IdentityError("not_configured", "this client has no identity secret")
    given = str(user_hash_hex).strip().lower()
    if any(hmac.compare_digest(user_hash(key, customer_id), given) for key in keys):
        return Identity(customer_id=customer_id, email="", name="", via="hmac")
    raise IdentityError("bad_signature", "user_hash does not match the customer id")


def _verify_jwt(*, client: Client, token: str, now: datetime) -> Identity:
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH:
        raise IdentityError("malformed", "identity_token must be a JWT string")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise IdentityError("malformed", f"not a JWT: {exc}") from None
    alg = header.get("alg")
    keys: list[Any]
    if alg == HS256:
        keys = active_identity_secrets(client, now=now)
    elif alg == RS256 and client.identity_public_key.strip():
        keys = [client.identity_public_key.strip()]
    else:
        raise IdentityError("alg_not_allowed", f"algorithm {alg!r} is not accepted")
    if not keys:
        raise IdentityError("not_configured", "this client has no identity secret")
    claims: dict[str, Any] | None = None
    for key in keys:
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],  # exactly the one the key is for: no algorithm confusion
                options={"require": ["exp", "sub"], "verify_aud": False},
                leeway=LEEWAY,
            )
            break
        except jwt.InvalidSignatureError:
            continue
        except jwt.ExpiredSignatureError:
            raise IdentityError("expired", "the identity token has expired") from None
        except jwt.MissingRequiredClaimError as exc:
            raise IdentityError("missing_claim", str(exc)) from None
        except (jwt.InvalidKeyError, jwt.InvalidAlgorithmError) as exc:
            raise IdentityError("alg_not_allowed", str(exc)) from None
        except jwt.PyJWTError as exc:
            raise IdentityError("malformed", str(exc)) from None
    if claims is None:
        raise IdentityError("bad_signature", "the identity token's signature does not verify")
    return _accept_claims(client=client, claims=claims, now=now, via="jwt")


def _accept_claims(*, client: Client, claims: dict[str, Any], now: datetime, via: str) -> Identity:
    exp = datetime.fromtimestamp(float(claims["exp"]), tz=UTC)
    if exp - now > MAX_TOKEN_LIFETIME + LEEWAY:
        raise IdentityError("lifetime_too_long", "exp is more than 24 hours ahead")
    iat = claims.get("iat")
    if isinstance(iat, int | float) and exp - datetime.fromtimestamp(iat, tz=UTC) > (
        MAX_TOKEN_LIFETIME + LEEWAY
    ):
        raise IdentityError("lifetime_too_long", "the token lives longer than 24 hours")
    sub, email, name = claims.get("sub"), claims.get("email", ""), claims.get("name", "")
    if not isinstance(sub, str) or not sub.strip() or len(sub) > MAX_CUSTOMER_ID:
        raise IdentityError("malformed", "sub must be the customer id (1-255 characters)")
    if not isinstance(email, str) or len(email) > 254 or (email and "@" not in email):
        raise IdentityError("malformed", "email must be an e-mail address")
    if not isinstance(name, str):
        raise IdentityError("malformed", "name must be a string")
    jti = claims.get("jti")
    if jti is not None:
        if not isinstance(jti, str) or not jti or len(jti) > 255:
            raise IdentityError("malformed", "jti must be a string")
        _use_jti(client=client, jti=jti, expires_at=exp + LEEWAY, now=now)
    return Identity(customer_id=sub.strip(), email=email.strip(), name=name.strip()[:200], via=via)


def _use_jti(*, client: Client, jti: str, expires_at: datetime, now: datetime) -> None:
    """Record `jti` as used (once per client); a second use raises `replayed`. Rows of tokens
    that have expired are pruned here: an expired token is refused before its jti is read."""
    uses = IdentityTokenUse.objects.for_client(client)
    uses.filter(expires_at__lt=now).delete()
    try:
        with transaction.atomic():
            IdentityTokenUse.objects.create(client=client, jti=jti, expires_at=expires_at)
    except IntegrityError:
        raise IdentityError("replayed", "this identity token was already used") from None


@transaction.atomic
def client_identity_secret_rotate(*, client: Client, grace: timedelta = ROTATION_GRACE) -> str:
    """Generate a new identity secret and return it (shown once). The secret it replaces keeps
    verifying for `grace` (0: at once no longer); a first secret has nothing to replace."""
    locked = Client.objects.select_for_update().get(pk=client.pk)
    new = identity_secret_generate()
    if locked.identity_secret and grace > timedelta(0):
        locked.identity_previous_secret = locked.identity_secret
        locked.identity_previous_secret_expires_at = timezone.now() + grace
    else:
        locked.identity_previous_secret = ""
        locked.identity_previous_secret_expires_at = None
    locked.identity_secret = new
    locked.save(
        update_fields=[
            "identity_secret",
            "identity_previous_secret",
            "identity_previous_secret_expires_at",
            "updated_at",
        ]
    )
    client.identity_secret = locked.identity_secret
    client.identity_previous_secret = locked.identity_previous_secret
    client.identity_previous_secret_expires_at = locked.identity_previous_secret_expires_at
    return new
