from __future__ import annotations

from typing import Any

from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import ApiKey, Membership, User
from apps.accounts.services import api_key_issue, api_key_revoke
from apps.api.admin import ClientSettingsAdmin, SuperuserOnlyAdmin, TenantScopedAdmin
from apps.api.permissions import client_role, may_grant

# django-allauth registers its e-mail addresses as an admin section of its own, also called
# "Accounts", beside ours. Staff sign in with their user's e-mail; the allauth row behind it
# (verified or not, primary) is shown on the user's page instead.
admin.site.unregister(EmailAddress)


class EmailAddressInline(admin.TabularInline):
    model = EmailAddress
    verbose_name = _("sign-in e-mail address")
    verbose_name_plural = _("Sign-in e-mail addresses (django-allauth)")
    fields = ["email", "primary", "verified"]
    readonly_fields = ["email", "primary"]  # the address is the user's e-mail, set above
    extra = 0

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(User)
class UserAdmin(SuperuserOnlyAdmin, DjangoUserAdmin):
    """Accounts span tenants (a user may belong to several clients), so only platform
    superusers manage them: client staff must never reset another tenant's password or grant
    themselves superuser."""

    ordering = ["email"]
    list_display = ["email", "first_name", "last_name", "is_staff", "is_superuser", "is_active"]
    search_fields = ["email", "first_name", "last_name"]
    fieldsets = [
        (None, {"fields": ["email", "password"]}),
        (_("Name"), {"fields": ["first_name", "last_name"]}),
        (_("Preferences"), {"fields": ["time_zone", "language"]}),
        (
            _("Permissions"),
            {"fields": ["is_active", "is_staff", "is_superuser", "groups", "user_permissions"]},
        ),
        (_("Dates"), {"fields": ["last_login", "date_joined"]}),
    ]
    inlines = [EmailAddressInline]
    add_fieldsets = [
        (None, {"classes": ["wide"], "fields": ["email", "password1", "password2", "is_staff"]})
    ]


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    """Client staff see their clients' members; who may act for a client (and with which role)
    is the platform's decision."""

    list_display = ["user", "client", "role", "created_at"]
    list_filter = ["role", ("client", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["user__email", "client__name"]
    autocomplete_fields = ["user"]

    change_need = None  # platform operators only
    list_select_related = ["user", "client"]


@admin.register(ApiKey)
class ApiKeyAdmin(ClientSettingsAdmin):
    """Keys are managed by a client's admins and owners (the API's rule); the secret is shown
    once when issued and stored hashed — no page ever shows it or its hash."""

    list_display = ["name", "client", "prefix", "role", "active", "last_used_at", "created_at"]
    list_filter = [("client", admin.RelatedOnlyFieldListFilter), "role"]
    search_fields = ["name", "prefix", "client__name"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["client", "name", "role"]
        return ["client", "name", "role", "prefix", "last_used_at", "revoked_at", "created_by"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        # A key's role is fixed at creation: raising it later would bypass the grant check.
        return ["client", "role", "prefix", "last_used_at", "revoked_at", "created_by"]

    @admin.display(boolean=True, description=_("Active"))
    def active(self, obj: ApiKey) -> bool:
        return obj.is_active

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Nobody changes or revokes a key with more power than they hold.
        return super().has_change_permission(request, obj) and (
            obj is None or self._may_grant(request, obj.client_id, obj.role)
        )

    def _may_grant(self, request: HttpRequest, client_id: int, role: str) -> bool:
        return may_grant(client_role(request.user, client_id), role)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not self._may_grant(request, obj.client_id, obj.role):
            raise PermissionDenied(
                _("Your role cannot manage keys with the %(role)s role in %(client)s.")
                % {"role": obj.role, "client": obj.client}
            )
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
            _("New API key for %(client)s: %(secret)s — copy it now, it will not be shown again.")
            % {"client": key.client, "secret": secret},
        )

    @admin.action(description=_("Revoke selected keys"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        # (every key was checked against the rule before the action ran: get_actions)
        keys = list(queryset.select_related("client"))
        for key in keys:
            api_key_revoke(client=key.client, api_key=key)
        count = queryset.count()
        self.message_user(
            request,
            _("Revoked %(count)d key(s).") % {"count": count},
        )


admin.site.unregister(Authenticator)


@admin.register(Authenticator)
class AuthenticatorAdmin(SuperuserOnlyAdmin):
    """MFA authenticators: an operator may see who has one and remove a lost one (the user then
    sets up a new one through allauth). The secret inside (`data`) is never shown."""

    list_display = ["user", "type", "created_at", "last_used_at"]
    list_filter = ["type", "created_at", "last_used_at"]
    fields = ("user", "type", "created_at", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
