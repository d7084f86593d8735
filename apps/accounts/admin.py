from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.accounts.models import ApiKey, Membership, User
from apps.accounts.services import api_key_issue, api_key_revoke
from apps.core.admin import TenantScopedAdmin


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    ordering = ["email"]
    list_display = ["email", "first_name", "last_name", "is_staff", "is_superuser", "is_active"]
    search_fields = ["email", "first_name", "last_name"]
    fieldsets = [
        (None, {"fields": ["email", "password"]}),
        ("Name", {"fields": ["first_name", "last_name"]}),
        (
            "Permissions",
            {"fields": ["is_active", "is_staff", "is_superuser", "groups", "user_permissions"]},
        ),
        ("Dates", {"fields": ["last_login", "date_joined"]}),
    ]
    add_fieldsets = [
        (None, {"classes": ["wide"], "fields": ["email", "password1", "password2", "is_staff"]})
    ]


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ["user", "client", "role", "created_at"]
    list_filter = ["role", "client"]
    search_fields = ["user__email", "client__name"]
    autocomplete_fields = ["user"]
    list_select_related = ["user", "client"]


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    list_display = ["name", "client", "prefix", "role", "active", "last_used_at", "created_at"]
    list_filter = ["client", "role"]
    search_fields = ["name", "prefix", "client__name"]
    list_select_related = ["client"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["client", "name", "role"]
        return ["client", "name", "role", "prefix", "last_used_at", "revoked_at", "created_by"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["client", "prefix", "last_used_at", "revoked_at", "created_by"]

    @admin.display(boolean=True, description="Active")
    def active(self, obj: ApiKey) -> bool:
        return obj.is_active

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, secret = api_key_issue(
            client=obj.client,
            name=obj.name,
            role=obj.role,
            created_by=request.user,  # type: ignore[arg-type]
        )
        obj.pk, obj.prefix, obj.secret_hash = key.pk, key.prefix, key.secret_hash
        obj._state.adding = False
        messages.warning(
            request,
            f"New API key for {key.client}: {secret} — copy it now, it will not be shown again.",
        )

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset.select_related("client"):
            api_key_revoke(client=key.client, api_key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")
