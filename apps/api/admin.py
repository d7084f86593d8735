"""Admin plumbing shared by every app: the permission rule per object's client, and JSON display."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, ClassVar, cast

from django import forms
from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.functional import Promise
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from apps.api.permissions import MANAGE, READ, SUPPORT, user_may
from apps.api.resolver import resolver
from apps.api.schema import parse_pk
from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.core.models import TenantOwnedModel
from apps.core.tenancy import TenantQuerySet


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
    """The admin side of the one permission rule (apps/api/permissions.py).

    Platform superusers see every tenant; client staff see a row only when their role in the
    row's client reaches `view_need`, and add, change or delete it only when it reaches
    `change_need` (None: platform operators only) — checked per object's client on list pages,
    change pages, inlines, custom views and for every object an admin action touches. Django's
    model permissions still apply on top: they can only narrow what the role allows.
    """

    view_need: ClassVar[str] = READ
    change_need: ClassVar[str | None] = MANAGE
    # How the row's client is reached: the queryset lookup and the id on an object.
    client_lookup: ClassVar[str] = "client_id"

    def client_id_of(self, obj: Any) -> int | None:
        return cast(int | None, getattr(obj, self.client_lookup))

    def role_permits_on(self, request: HttpRequest, obj: Any, need: str | None) -> bool:
        """The rule for `obj`'s client; without an object, whether any of the user's clients
        permits it (the page then shows only the rows the user may see)."""
        user = request.user
        if user.is_superuser:
            return bool(user.is_active)
        if need is None:
            return False
        if obj is None:
            return bool(resolver.admin_client_ids(request, need))
        return user_may(user, self.client_id_of(obj), need)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        allowed = resolver.admin_client_ids(request, self.view_need)
        if allowed is None:
            return _unscoped(queryset, "a platform operator's admin page shows every client")
        return queryset.filter(**{f"{self.client_lookup}__in": allowed})

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and self.role_permits_on(
            request, None, self.view_need
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) and self.role_permits_on(
            request, obj, self.view_need
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and self.role_permits_on(
            request, None, self.change_need
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and self.role_permits_on(
            request, obj, self.change_need
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self.role_permits_on(
            request, obj, self.change_need
        )

    def has_support_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Agent work (reply, resolve, hand back): admin actions declare
        `permissions=["support"]`. Needs Django's change permission on the model too."""
        opts = self.opts
        codename = get_permission_codename("change", opts)
        return request.user.has_perm(f"{opts.app_label}.{codename}") and self.role_permits_on(
            request, obj, SUPPORT
        )

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "client" and not request.user.is_superuser:
            # Only the clients where the user may create or change rows.
            permitted = resolver.admin_client_ids(request, self.change_need) or []
            kwargs["queryset"] = Client.objects.filter(pk__in=permitted)
        elif _is_tenant_owned(db_field.related_model) and "queryset" not in kwargs:
            # A link to another tenant row: the rows of the clients the user may change.
            allowed = resolver.admin_client_ids(request, self.change_need or READ)
            rows = db_field.related_model._default_manager.all()
            kwargs["queryset"] = (
                _unscoped(rows, "a platform operator may link rows of any client")
                if allowed is None
                else rows.filter(client_id__in=allowed)
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # Belt and braces: the form offers only permitted clients, the view checked the object.
        if not self.role_permits_on(request, obj, self.change_need):
            raise PermissionDenied
        super().save_model(request, obj, form, change)

    def get_actions(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        """Every action re-checks its permissions (`change` when it declares none) for each
        object it is about to touch: a user who may act in one client must not act on another
        client's rows selected alongside."""
        actions: dict[str, Any] = super().get_actions(request, *args, **kwargs)
        return {
            name: (_checked_action(func), name, description)
            for name, (func, _, description) in actions.items()
        }


class ClientSettingsAdmin(TenantScopedAdmin):
    """A client's configuration (API keys, event endpoints, tools, MCP servers, e-mail channels,
    identity checks): only its admins and owners see or change it, as in the API."""

    view_need = MANAGE
    change_need = MANAGE
    list_select_related = ["client"]


class WriteOnlySecretFormField(forms.CharField):
    """A secret typed into an admin form and never shown back: an empty box keeps the saved one
    (the service the form hands it to drops it), and browsers do not fill a saved password in."""

    widget = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)


class ServiceCheckedForm(forms.ModelForm):
    """An admin form held to the same rules as the API: `service_clean` (the service's own
    check) returns the cleaned values or raises an ApplicationError naming the bad fields; each
    of its problems is shown on its field (on the form when the form has no such field), unless
    the form already said what is wrong with that field."""

    def service_clean(
        self, *, client: Client | None, values: dict[str, Any], instance: Any
    ) -> dict[str, Any]:
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        client = data.get("client") or (self.instance.client if self.instance.client_id else None)
        instance = self.instance if self.instance.pk else None
        try:
            data.update(self.service_clean(client=client, values=data, instance=instance))
        except ApplicationError as exc:
            for field, problems in (exc.extra.get("fields") or {}).items():
                if field in self.errors:
                    continue  # the form already said what is wrong with it
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)
        return data


def _is_tenant_owned(model: Any) -> bool:
    return isinstance(model, type) and issubclass(model, TenantOwnedModel)


def _unscoped(queryset: QuerySet[Any], reason: str) -> QuerySet[Any]:
    """`queryset.unscoped(reason)` for a tenant-owned model's queryset; others as they are."""
    if isinstance(queryset, TenantQuerySet):
        return queryset.unscoped(reason)
    return queryset


def _checked_action(func: Callable[..., Any]) -> Callable[..., Any]:
    permissions = getattr(func, "allowed_permissions", None) or ("change",)

    @wraps(func)
    def run(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        for obj in queryset:
            for permission in permissions:
                if not getattr(modeladmin, f"has_{permission}_permission")(request, obj):
                    raise PermissionDenied(f"You may not {permission} {obj}.")
        return func(modeladmin, request, queryset)

    return run


class ReadOnlyAuditAdmin(TenantScopedAdmin):
    """Audit trail: viewable, never added, edited or deleted by hand."""

    change_need = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class LanguageFilter(admin.SimpleListFilter):
    """Rows by their `language`; "-" picks the rows with none, shown as `empty_label`."""

    title = _("language")
    parameter_name = "language"
    empty_label: ClassVar[str | Promise] = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        languages = (
            model_admin.get_queryset(request)
            .order_by("language")
            .values_list("language", flat=True)
            .distinct()
        )
        return [(lang or "-", lang or str(self.empty_label)) for lang in languages]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(language="" if value == "-" else value)


class ReadOnlyInline(admin.TabularInline):
    """Rows shown on their parent's page and never added, changed or deleted there."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ClientReportAdmin(ReadOnlyAuditAdmin):
    """A list of the clients this user may see (a proxy of Client), each opening its own report
    page: `report_view` at `<client_id>/`, named `report_url_name`; a row's change link goes
    there too. Staff need one of `report_perms` and the role `view_need` on the client."""

    change_need = None
    client_lookup = "pk"
    report_perms: ClassVar[tuple[str, ...]] = ()
    report_url_name: ClassVar[str] = ""

    list_select_related = ["plan"]
    search_fields = ["name", "slug"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("plan")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return bool(
            user.is_active
            and user.is_staff
            and (user.is_superuser or any(user.has_perm(perm) for perm in self.report_perms))
            and self.role_permits_on(request, obj, self.view_need)
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.report_view)
        return [path("<int:client_id>/", view, name=self.report_url_name), *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        pk = parse_pk(object_id)
        if pk is None:
            raise Http404
        return HttpResponseRedirect(reverse(f"admin:{self.report_url_name}", args=[pk]))

    def report_client(self, request: HttpRequest, client_id: int) -> Client:
        """The client whose page this is. Another tenant's client (or one where the role is too
        low) looks like a missing one."""
        client = self.get_queryset(request).filter(pk=client_id).first()
        if client is None or not self.has_view_permission(request, client):
            raise Http404
        return cast(Client, client)

    def report_view(self, request: HttpRequest, client_id: int) -> HttpResponse:
        raise NotImplementedError


class ActionOnlyAdmin(ReadOnlyAuditAdmin):
    """Rows created by the product, changed only through admin actions that call services
    (each declaring the permission it needs, e.g. `permissions=["support"]`); the object page
    itself is read-only."""


class SuperuserOnlyAdmin(admin.ModelAdmin):
    """Platform-wide data only platform superusers may see or change."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_operator(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_operator(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_operator(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_operator(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_operator(request)


class PlatformOnlyAdmin(SuperuserOnlyAdmin):
    """Platform data (plans, model prices): platform operators only — a tenant reads its own
    plan and prices through its client page and the billing API."""


def _is_operator(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_superuser)


def lock_platform_admins(site: admin.AdminSite) -> None:
    """Admins registered by third-party apps (groups, periodic tasks, e-mail addresses, MFA
    authenticators) hold platform-wide rows: re-register each behind `SuperuserOnlyAdmin` so
    no Django permission handed to client staff opens them. Called once the admin modules are
    loaded (CoreConfig.ready)."""
    for model, model_admin in list(site._registry.items()):
        if isinstance(model_admin, TenantScopedAdmin | SuperuserOnlyAdmin):
            continue
        base = type(model_admin)
        site.unregister(model)
        site.register(model, type(f"Platform{base.__name__}", (SuperuserOnlyAdmin, base), {}))
