"""Shared model plumbing: timestamps and the tenant-owned base every client-scoped model uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from django.db import models

if TYPE_CHECKING:
    from apps.clients.models import Client


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class TenantQuerySet[M: models.Model](models.QuerySet[M]):
    def for_client(self, client: Client) -> Self:
        """The only way request-serving code reads tenant data: always scoped to one client."""
        if client is None or client.pk is None:
            raise ValueError("for_client() needs a saved client")
        return self.filter(client=client)


class TenantOwnedModel(TimeStampedModel):
    """Abstract base of every tenant-owned model.
    Unique constraints and indexes start with `client`."""

    client = models.ForeignKey("clients.Client", on_delete=models.CASCADE, related_name="+")

    objects = TenantQuerySet.as_manager()

    class Meta:
        abstract = True
