"""Reasoning traces: a read-only list of turns with their steps. The conversation debug view
shows the same steps in context; this list is for looking across conversations (slow turns,
how often the critique triggers, failures)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import F
from django.http import HttpRequest
from django.utils.safestring import SafeString

from apps.conversations.admin import conversation_link
from apps.core.admin import ReadOnlyAuditAdmin, pretty_json_block
from apps.reasoning.models import ReasoningStep, ReasoningTrace

REASONING_STEP_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error",
    "input_summary",
    "output_pretty",
)


class ReasoningStepInline(admin.TabularInline):
    model = ReasoningStep
    fk_name = "trace"
    extra = 0
    can_delete = False
    fields = REASONING_STEP_FIELDS
    readonly_fields = REASONING_STEP_FIELDS
    ordering = ["index"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Output")
    def output_pretty(self, obj: ReasoningStep) -> SafeString | str:
        return pretty_json_block(obj.output)


REASONING_TRACE_FIELDS: tuple[str, ...] = (
    "conversation_short",
    "client",
    "user_message",
    "mode",
    "model",
    "status",
    "critique_triggered",
    "critique_reasons_pretty",
    "context_fetched_pretty",
    "escalated",
    "tool_calls",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "duration_ms",
    "llm_wait_ms",
    "error",
    "created_at",
    "finished_at",
)


@admin.register(ReasoningTrace)
class ReasoningTraceAdmin(ReadOnlyAuditAdmin):
    inlines = [ReasoningStepInline]
    list_display = [
        "created_at",
        "conversation_short",
        "client",
        "mode",
        "status",
        "critique_triggered",
        "escalated",
        "llm_calls",
        "total_tokens",
        "duration_ms",
    ]
    list_filter = [
        "mode",
        "status",
        "critique_triggered",
        "escalated",
        ("client", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    list_select_related = ["client", "conversation"]
    search_fields = ["conversation__visitor_id", "error"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    fields = REASONING_TRACE_FIELDS
    readonly_fields = REASONING_TRACE_FIELDS

    @admin.display(description="Conversation", ordering="conversation__created_at")
    def conversation_short(self, obj: ReasoningTrace) -> SafeString | str:
        return conversation_link(obj.conversation)

    @admin.display(description="Tokens", ordering=F("prompt_tokens") + F("completion_tokens"))
    def total_tokens(self, obj: ReasoningTrace) -> int:
        return obj.prompt_tokens + obj.completion_tokens

    @admin.display(description="Critique reasons")
    def critique_reasons_pretty(self, obj: ReasoningTrace) -> str:
        return ", ".join(str(r) for r in obj.critique_reasons or []) or "-"

    @admin.display(description="Context fetched")
    def context_fetched_pretty(self, obj: ReasoningTrace) -> str:
        return ", ".join(str(c) for c in obj.context_fetched or []) or "-"
