"""Reasoning traces: a read-only list of turns with their steps. The conversation debug view
shows the same steps in context; this list is for looking across conversations (slow turns,
how often the critique triggers, failures)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import F
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ReadOnlyAuditAdmin, ReadOnlyInline, pretty_json_block
from apps.conversations.admin import conversation_link
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceKind
from apps.reasoning.rendering import step_html

REASONING_STEP_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error",
    "input_summary",
    "output_view",
    "output_pretty",
)


class ReasoningStepInline(ReadOnlyInline):
    model = ReasoningStep
    fk_name = "trace"
    fields = REASONING_STEP_FIELDS
    readonly_fields = REASONING_STEP_FIELDS
    ordering = ["index"]

    @admin.display(description=_("Step"))
    def output_view(self, obj: ReasoningStep) -> SafeString:
        """The step as its view says (apps/reasoning/rendering.py), like the playground page
        and `manage.py reason` show it."""
        return step_html(obj)

    @admin.display(description=_("Output"))
    def output_pretty(self, obj: ReasoningStep) -> SafeString | str:
        return pretty_json_block(obj.output)


REASONING_TRACE_FIELDS: tuple[str, ...] = (
    "kind",
    "owner",
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
    "cost_usd",
    "billed_usd",
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
        "kind",
        "owner",
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
        "kind",
        "mode",
        "status",
        "critique_triggered",
        "escalated",
        ("client", admin.RelatedOnlyFieldListFilter),
        "created_at",
    ]
    list_select_related = ["client", "conversation", "playground_run"]
    search_fields = ["conversation__visitor_id", "error"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    fields = REASONING_TRACE_FIELDS
    readonly_fields = REASONING_TRACE_FIELDS

    @admin.display(description=_("Belongs to"))
    def owner(self, obj: ReasoningTrace) -> SafeString | str:
        """The conversation of a turn; the question of a playground run."""
        if obj.kind == TraceKind.PLAYGROUND and obj.playground_run is not None:
            run = obj.playground_run
            return format_html(str(_("Playground run “{}”")), Truncator(run.question).chars(60))
        return conversation_link(obj.conversation)

    @admin.display(description=_("Tokens"), ordering=F("prompt_tokens") + F("completion_tokens"))
    def total_tokens(self, obj: ReasoningTrace) -> int:
        return obj.prompt_tokens + obj.completion_tokens

    @admin.display(description=_("Critique reasons"))
    def critique_reasons_pretty(self, obj: ReasoningTrace) -> str:
        return ", ".join(str(r) for r in obj.critique_reasons or []) or "-"

    @admin.display(description=_("Context fetched"))
    def context_fetched_pretty(self, obj: ReasoningTrace) -> str:
        return ", ".join(str(c) for c in obj.context_fetched or []) or "-"
