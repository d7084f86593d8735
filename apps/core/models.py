"""Shared model plumbing: timestamps, the tenant-owned base every client-scoped model uses, and
the one for those shown by a public id."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.tenancy import TenantQuerySet

__all__ = ["PublicTenantModel", "TenantOwnedModel", "TenantQuerySet", "TimeStampedModel"]


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(
        auto_now_add=True, db_index=True, verbose_name=_("created at")
    )
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        abstract = True


class TenantOwnedModel(TimeStampedModel):
    """Abstract base of every tenant-owned model.
    Unique constraints and indexes start with `client`.

    `objects` fails closed: a query must be scoped to a client (apps/core/tenancy.py).
    `_base_manager` stays Django's plain manager, for cascades, FK access and refresh_from_db."""

    client = models.ForeignKey(
        "clients.Client", on_delete=models.CASCADE, related_name="+", verbose_name=_("client")
    )

    objects = TenantQuerySet.as_manager()

    class Meta:
        abstract = True


class PublicTenantModel(TenantOwnedModel):
    """A tenant-owned model the APIs, the widget or a link show by `public_id`: opaque, so it
    tells nobody how many rows other tenants have."""

    public_id = models.UUIDField(
        default=uuid.uuid4, unique=True, editable=False, verbose_name=_("public id")
    )

    class Meta:
        abstract = True
