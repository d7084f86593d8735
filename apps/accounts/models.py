from __future__ import annotations

import functools
import hashlib
import hmac
import zoneinfo
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractUser, BaseUserManager
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk
from apps.core.models import TenantOwnedModel, TenantQuerySet


def validate_time_zone(value: str) -> None:
    """An IANA time zone name (Europe/Madrid, America/New_York, UTC)."""
    if value and value not in available_time_zones():
        raise ValidationError(
            _("%(value)s is not a time zone name (e.g. Europe/Madrid)."),
            params={"value": value},
            code="time_zone",
        )


def validate_staff_language(value: str) -> None:
    """One of the languages the staff pages are offered in (settings.LANGUAGES)."""
    if value and value not in {code for code, _name in settings.LANGUAGES}:
        raise ValidationError(
            _("%(value)s is not one of the languages offered."),
            params={"value": value},
            code="language",
        )


@functools.cache
def available_time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def _create(self, email: str, password: str | None, **extra: Any) -> User:
        if not email:
            raise ValueError("An e-mail address is required.")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.update(is_staff=True, is_superuser=True)
        return self._create(email, password, **extra)


class User(AbstractUser):
    """A staff user (client staff or platform operator). Logs in with e-mail."""

    username = None  # type: ignore[assignment]
    email = models.EmailField(_("e-mail address"), unique=True)
    # How the admin and the console speak to this staff member (apps.accounts.middleware):
    # times in their time zone, words in their language. Empty: the site's defaults.
    time_zone = models.CharField(
        _("time zone"),
        max_length=64,
        blank=True,
        default="",
        validators=[validate_time_zone],
        help_text=_(
            "e.g. Europe/Madrid. The admin and the console show times in this zone. Empty: UTC."
        ),
    )
    language = models.CharField(
        _("language"),
        max_length=16,
        blank=True,
        default="",
        validators=[validate_staff_language],
        help_text=_("The language of the admin and the console for you. Empty: the browser's."),
    )

    USERNAME_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    objects: ClassVar[UserManager] = UserManager()  # type: ignore[assignment]

    class Meta:
        verbose_name = _("user")
        verbose_name_plural = _("users")

    def __str__(self) -> str:
        return self.email


class Role(models.TextChoices):
    OWNER = "owner", _("Owner")
    ADMIN = "admin", _("Admin")
    AGENT = "agent", _("Agent")
    VIEWER = "viewer", _("Viewer")


# What each role may do; checked by services and API permissions.
ROLE_RANK = {Role.VIEWER: 0, Role.AGENT: 1, Role.ADMIN: 2, Role.OWNER: 3}


def role_at_least(role: str, minimum: str) -> bool:
    return ROLE_RANK[Role(role)] >= ROLE_RANK[Role(minimum)]


class Membership(TenantOwnedModel):
    """A staff user's access to one client, with a role."""

    user = models.ForeignKey(
        User, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("user")
    )
    role = models.CharField(
        max_length=10, choices=Role.choices, default=Role.AGENT, verbose_name=_("role")
    )

    class Meta:
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(fields=["client", "user"], name="uniq_membership_client_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.client} ({self.role})"


def hash_api_secret(secret: str) -> str:
    # API keys carry ~190 bits of randomness, so a fast keyed hash is enough (no need for a
    # password KDF); SHA-256 keeps authentication cheap on every request.
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeyQuerySet(TenantQuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKey(TenantOwnedModel):
    """A back-office credential scoped to one client. The secret is shown once and stored hashed."""

    name = models.CharField(max_length=100, verbose_name=_("name"))
    prefix = models.CharField(
        max_length=16,
        unique=True,
        help_text=_("Shown to identify the key."),
        verbose_name=_("prefix"),
    )
    secret_hash = models.CharField(max_length=64, editable=False, verbose_name=_("secret hash"))
    role = models.CharField(
        max_length=10, choices=Role.choices, default=Role.ADMIN, verbose_name=_("role")
    )
    created_by = optional_fk(User, _("created by"))
    last_used_at = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("last used at")
    )
    revoked_at = models.DateTimeField(null=True, blank=True, verbose_name=_("revoked at"))

    objects = ApiKeyQuerySet.as_manager()  # type: ignore[misc]

    class Meta:
        verbose_name_plural = _("API keys")
        verbose_name = _("API key")
        indexes = [models.Index(fields=["client", "revoked_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, hash_api_secret(secret))

    def mark_used(self) -> None:
        now = timezone.now()
        # Write at most once a minute per key: no write on every request.
        if self.last_used_at is None or (now - self.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=self.pk, client_id=self.client_id).update(last_used_at=now)
            self.last_used_at = now
