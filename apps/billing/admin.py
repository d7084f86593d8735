from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.billing.models import ModelPrice, UsageRecord
from apps.core.admin import PlatformOnlyAdmin, TenantScopedAdmin


@admin.register(ModelPrice)
class ModelPriceAdmin(PlatformOnlyAdmin):
    list_display = ["model", "input_per_million", "output_per_million", "updated_at"]
    search_fields = ["model"]


@admin.register(UsageRecord)
class UsageRecordAdmin(TenantScopedAdmin):
    list_display = [
        "created_at",
        "client",
        "mode",
        "step",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "billed_usd",
        "tokens_estimated",
    ]
    list_filter = ["client", "mode", "step", "model"]
    list_select_related = ["client"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in UsageRecord._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
