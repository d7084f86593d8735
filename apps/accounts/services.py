from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import (
    ApiKey,
    Role,
    User,
    hash_api_secret,
    validate_staff_language,
    validate_time_zone,
)
from apps.clients.models import Client

API_KEY_PREFIX = "gd"


@transaction.atomic
def api_key_issue(
    *, client: Client, name: str, role: str = Role.ADMIN, created_by: User | None = None
) -> tuple[ApiKey, str]:
    """Create a key and return it with its secret. The secret is not stored and cannot be shown
    again; only its hash is kept."""
    prefix = secrets.token_hex(4)
    while (
        ApiKey.objects.unscoped("key prefixes are unique across clients")
        .filter(prefix=prefix)
        .exists()
    ):  # pragma: no cover - 1 in 4 billion
        prefix = secrets.token_hex(4)
    secret = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(
        client=client,
        name=name,
        prefix=prefix,
        secret_hash=hash_api_secret(secret),
        role=Role(role),
        created_by=created_by,
    )
    return key, secret


@transaction.atomic
def api_key_revoke(*, client: Client, api_key: ApiKey) -> ApiKey:
    if api_key.client_id != client.pk:
        raise ValueError("API key belongs to another client")
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at", "updated_at"])
    return api_key


def parse_api_key(raw: str) -> tuple[str, str] | None:
    """'gd_<prefix>_<random>' -> (prefix, whole key); None when it is not shaped like a key."""
    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != API_KEY_PREFIX or len(parts[1]) != 8 or not parts[2]:
        return None
    if any(c not in "0123456789abcdef" for c in parts[1]) or "\x00" in raw:
        return None
    return parts[1], raw


@transaction.atomic
def user_preferences_update(*, user: User, time_zone: str, language: str) -> User:
    """Set how the admin and the console show things to `user`: their time zone and language
    ('' = the site's defaults). Raises ValidationError naming the field for an unknown one."""
    time_zone, language = time_zone.strip(), language.strip()
    errors: dict[str, list[ValidationError]] = {}
    for name, value, validate in (
        ("time_zone", time_zone, validate_time_zone),
        ("language", language, validate_staff_language),
    ):
        try:
            validate(value)
        except ValidationError as exc:
            errors[name] = [exc]
    if errors:
        raise ValidationError(errors)
    user.time_zone, user.language = time_zone, language
    user.save(update_fields=["time_zone", "language"])
    return user
