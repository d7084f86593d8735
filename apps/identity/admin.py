"""Staff see each client's e-mail code setting and every code sent (never the code: only its
HMAC is stored, and the admin does not show even that)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ClientSettingsAdmin, ReadOnlyAuditAdmin
from apps.api.permissions import MANAGE
from apps.conversations.admin import conversation_column
from apps.identity.models import EmailCodeChallenge, EmailCodeSetting
from apps.identity.services import email_code_setting_errors


class EmailCodeSettingForm(forms.ModelForm):
    class Meta:
        model = EmailCodeSetting
        fields = ["client", "tool_name", "email_field", "id_field", "enabled"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        client = data.get("client") or getattr(self.instance, "client", None)
        if client is None or self.errors:
            return data
        errors = email_code_setting_errors(
            client=client,
            tool_name=data.get("tool_name", ""),
            email_field=data.get("email_field", ""),
            id_field=data.get("id_field", ""),
        )
        for name, message in errors.items():
            self.add_error("tool_name" if name == "tool" else name, message)
        return data


@admin.register(EmailCodeSetting)
class EmailCodeSettingAdmin(ClientSettingsAdmin):
    form = EmailCodeSettingForm
    list_display = ["client", "tool_name", "email_field", "id_field", "enabled"]
    fieldsets = [
        (
            None,
            {
                "fields": ["client", "tool_name", "email_field", "id_field", "enabled"],
                "description": _(
                    "For shops without a login: the assistant can confirm who a customer is by "
                    "e-mailing a 6-digit code to the address on file. The read tool named here "
                    "is run with the details the customer gives (e.g. an order number); the "
                    "code goes only to the address in its result, never to one the customer "
                    "types."
                ),
            },
        )
    ]


CHALLENGE_FIELDS = (
    "created_at",
    "client",
    "conversation_short",
    "email",
    "customer_ref",
    "tool_name",
    "status",
    "attempts",
    "expires_at",
    "verified_at",
)


@admin.register(EmailCodeChallenge)
class EmailCodeChallengeAdmin(ReadOnlyAuditAdmin):
    # Addresses customers are verified by: personal data, read by admins (as privacy requests).
    view_need = MANAGE
    list_display = [
        "created_at",
        "client",
        "conversation_short",
        "email",
        "status",
        "attempts",
        "expires_at",
    ]
    list_filter = ["status", ("client", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["client", "conversation"]
    search_fields = ["email", "customer_ref"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    fields = CHALLENGE_FIELDS
    readonly_fields = CHALLENGE_FIELDS

    conversation_short = conversation_column(sortable=True)
