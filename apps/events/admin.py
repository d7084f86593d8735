"""Events out in the admin: the subscriptions (the event checklist; the secret shown once, when
one is added) and the delivery log (read-only, with *Resend*)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ActionOnlyAdmin, ClientSettingsAdmin, pretty_json_block
from apps.api.permissions import MANAGE
from apps.core.exceptions import ApplicationError
from apps.events.models import EventDelivery, EventSubscription, EventType
from apps.events.services import (
    delivery_resend,
    event_types_clean,
    subscription_create,
    subscription_update,
    url_check,
)


class SubscriptionForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(
        label=_("event types"),
        choices=EventType.choices,
        widget=forms.CheckboxSelectMultiple,
    )

    class Meta:
        model = EventSubscription
        fields = (
            "client",
            "name",
            "url",
            "format",
            "event_types",
            "include_customer_text",
            "active",
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            if data.get("url"):
                url_check(data["url"])
            if "event_types" in data:
                data["event_types"] = event_types_clean(
                    list(data["event_types"]), data.get("format") or "events"
                )
        except ApplicationError as exc:
            fields = exc.extra.get("fields") or {}
            for field, message in fields.items():
                self.add_error(field, message)
            if not fields:
                raise forms.ValidationError(exc.message) from None
        return data


@admin.register(EventSubscription)
class EventSubscriptionAdmin(ClientSettingsAdmin):
    """The client's endpoints. Admins add and change them (they send conversations out)."""

    form = SubscriptionForm
    list_display = ["__str__", "client", "format", "include_customer_text", "active", "created_at"]
    list_filter = ["format", "active", ("client", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "url"]

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """A subscription's delivery log goes with it (nobody deletes log rows one by one)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(str(EventDelivery._meta.verbose_name))
        return deleted, counts, perms_needed, protected

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not self.role_permits_on(request, obj, self.change_need):
            raise PermissionDenied
        data = form.cleaned_data
        values = {
            "url": data["url"],
            "name": data.get("name") or "",
            "event_types": data["event_types"],
            "include_customer_text": data.get("include_customer_text", False),
            "active": data.get("active", True),
            "fmt": data.get("format") or "events",
        }
        if change:
            subscription_update(client=obj.client, subscription=obj, **values)
            return
        created = subscription_create(client=data["client"], **values)
        obj.pk, obj.public_id, obj.secret = created.pk, created.public_id, created.secret
        obj.created_at, obj.updated_at = created.created_at, created.updated_at
        messages.warning(
            request,
            _("The signing secret, shown this once: %(secret)s") % {"secret": created.secret},
        )


@admin.register(EventDelivery)
class EventDeliveryAdmin(ActionOnlyAdmin):
    """The delivery log: what was sent where, and how it went."""

    view_need = MANAGE
    list_display = [
        "event_type",
        "subscription",
        "status",
        "attempts",
        "last_status_code",
        "latency_ms",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "event_type", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["subscription", "client"]
    search_fields = ["event_id"]
    fields = (
        "event_id",
        "event_type",
        "subscription",
        "conversation_public_id",
        "status",
        "attempts",
        "last_status_code",
        "last_error",
        "latency_ms",
        "next_attempt_at",
        "delivered_at",
        "content_erased",
        "payload_block",
    )
    readonly_fields = fields
    actions = ["resend"]

    @admin.display(description=_("Payload"))
    def payload_block(self, obj: EventDelivery) -> Any:
        return pretty_json_block(obj.payload)

    def has_resend_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        opts = self.opts
        codename = get_permission_codename("change", opts)
        return request.user.has_perm(f"{opts.app_label}.{codename}") and self.role_permits_on(
            request, obj, MANAGE
        )

    @admin.action(description=_("Resend"), permissions=["resend"])
    def resend(self, request: HttpRequest, queryset: QuerySet[EventDelivery]) -> None:
        count = 0
        for delivery in queryset.select_related("client"):
            delivery_resend(client=delivery.client, delivery=delivery)
            count += 1
        self.message_user(request, _("%(n)s queued to be sent again.") % {"n": count})
