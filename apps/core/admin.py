"""Admin plumbing shared by every app: tenant scoping and JSON display."""

from __future__ import annotations

import json
from typing import Any, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from apps.accounts.models import Membership, User
from apps.clients.models import Client


def pretty_json(value: Any) -> str:
    """Indented JSON for humans; empty string for empty values."""
    if value in (None, {}, [], ""):
        return ""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def pretty_json_block(value: Any) -> SafeString | str:
    text = pretty_json(value)
    if not text:
        return "-"
    return format_html('<pre style="white-space:pre-wrap;margin:0">{}</pre>', text)


class TenantScopedAdmin(admin.ModelAdmin):
    """Platform superusers see every tenant; other staff only the clients they are members of.

    The tenancy rule holds in the admin too: client staff must never see another client's
    conversations, tools or escalations.
    """

    def _member_client_ids(self, request: HttpRequest) -> QuerySet[Membership, Any]:
        # The admin only serves signed-in staff, so the user is never anonymous here.
        return Membership.objects.filter(user=cast(User, request.user)).values("client_id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(client_id__in=self._member_client_ids(request))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "client" and not request.user.is_superuser:
            kwargs["queryset"] = Client.objects.filter(pk__in=self._member_client_ids(request))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class PlatformOnlyAdmin(admin.ModelAdmin):
    """Platform data (plans, model prices): client staff may look, only superusers may change."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)


class ReadOnlyAuditAdmin(TenantScopedAdmin):
    """Audit trail: viewable, never added, edited or deleted by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ActionOnlyAdmin(TenantScopedAdmin):
    """Rows created by the product, changed only through admin actions that call services: the
    model-level change permission gates the actions, the object page itself is read-only."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SuperuserOnlyAdmin(admin.ModelAdmin):
    """Platform-wide data only platform superusers may see or change."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)
