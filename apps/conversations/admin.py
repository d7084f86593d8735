"""Conversation admin: a read-only changelist and a debug view of one conversation.

The debug view is what a support lead opens to understand why the assistant did what it did: the
whole conversation in order, visible and internal messages interleaved, a plain-words legend, every
turn's reasoning steps, and the escalation state. It renders from a handful of queries however long
the conversation is (see `debug_context`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from apps.api.admin import ActionOnlyAdmin, pretty_json
from apps.clients import modes
from apps.clients.models import Plan
from apps.conversations.models import Conversation, Kind, Message, Visibility
from apps.conversations.selectors import message_count, open_escalation
from apps.escalations.models import Escalation, EscalationStatus
from apps.notes.debug import InjectedNote, injected_notes
from apps.outcomes.models import ConversationResolution
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.rendering import DELIBERATIVE_CAP_STEP, deliberative_cap_text, step_html


def conversation_link(conversation: Conversation | None) -> SafeString | str:
    """A link to the conversation debug view, labelled with the short public id."""
    if conversation is None:
        return "-"
    url = reverse("admin:conversations_conversation_change", args=[conversation.pk])
    return format_html(
        '<a href="{}" title="{}">{}…</a>',
        url,
        conversation.public_id,
        str(conversation.public_id)[:8],
    )


def conversation_column(*, sortable: bool = False) -> Callable[[Any, Any], SafeString | str]:
    """An admin column (a ModelAdmin method) that links a row's conversation to its debug view;
    a `sortable` one orders the list by when the conversation started."""

    @admin.display(
        description=_("Conversation"), ordering="conversation__created_at" if sortable else None
    )
    def column(modeladmin: Any, obj: Any) -> SafeString | str:
        return conversation_link(obj.conversation)

    return column


# ---------------------------------------------------------------------------------------------
# The debug legend: every message kind in plain words.
# ---------------------------------------------------------------------------------------------

KIND_EXPLANATIONS: dict[str, str | Promise] = {
    Kind.TEXT: _(
        "An ordinary chat message the customer sees — from the customer, the assistant "
        "or a staff member."
    ),
    Kind.CONFIRMATION_REQUEST: _(
        "The assistant asks the customer to confirm a risky action "
        "(cancel, refund …) with its exact details. Nothing runs until the customer's next message "
        "confirms it."
    ),
    Kind.HANDOFF: _("The customer is told that a human is taking over the conversation."),
    Kind.NOTICE: _(
        "An informational message shown to the customer, e.g. that a human will reply "
        "soon or that the assistant could not answer."
    ),
    Kind.ASSESSMENT: _(
        "The assistant's self-check before answering: how confident it is (1–10), "
        "which tool it plans to use, and which details are still missing."
    ),
    Kind.CONTEXT_FETCH: _(
        "Extra business information (a policy, the FAQs, a tool's details) loaded "
        "on demand because the short starting context was not enough."
    ),
    Kind.CRITIQUE: _(
        "A second check before a risky action. It decides PROCEED (go ahead), "
        "ASK_USER (ask the customer first) or ESCALATE (hand over to a human)."
    ),
    Kind.GUARD: _(
        "A safety rule enforced in code, whatever the AI said: e.g. the tool is disabled, "
        "its parameters are invalid, the customer has not confirmed, too many tool calls, or the "
        "token budget is used up."
    ),
    Kind.TOOL_CALL: _(
        "The assistant runs one of the business's tools (order status, cancel order "
        "…) with the parameters shown."
    ),
    Kind.TOOL_RESULT: _("What the tool returned, or the error it reported."),
    Kind.ESCALATION: _(
        "The conversation was handed to a human, and why. The AI stays silent "
        "until staff hand it back."
    ),
    Kind.STAFF_NOTE: _(
        "A note a staff member left for the team. The customer never sees it and the "
        "assistant never reads it."
    ),
    # The legend shows each of these only where it can occur (`mode_kinds`, PLAN_SWITCHED_KINDS
    # below) or where the conversation holds one.
    Kind.EVALUATION: _(
        "A second opinion (when the plan has evaluation on): another AI call "
        "checked the answer against the business info and tool results it used — validated "
        "(confidence +10 %), questioned (−30 %; handed to a human if too low), improved (a better "
        "answer replaced it), undecided (kept) or failed (the answer was sent as it was)."
    ),
    Kind.REASONING_STEP: _(
        "Deliberative mode: one step of the reasoning loop — what the assistant "
        "thought, its self-scores on each rubric principle (0–1) with their mean, and why. The "
        "loop "
        "runs at least MIN and at most MAX steps and stops once the mean reaches the target."
    ),
    Kind.FEEDBACK: _(
        "Deliberative mode: the server's feedback after a step — a second model call "
        "that reads every step's scores and the rubric's definitions and says what the next step "
        "should improve; the next step sees it as [Server Feedback from Step N]."
    ),
    Kind.REFINEMENT: _(
        "Deliberative mode: the answer's refinement — the draft, each critique (a "
        "score 0–100 and issues quoting the sentence they concern) and each improved version; the "
        "best-scoring version is sent."
    ),
    Kind.CLARIFICATION: _(
        "The assistant asked the customer one clarifying question: deliberative "
        "mode (with quick-reply buttons) when two readings of their message were too close to "
        "guess, "
        "or any critique-using mode when the critique said PROCEED on a draft at or below the "
        "confidence floor (REASONING_CRITIQUE_FLOOR) that lacked what it needed."
    ),
    Kind.ERROR: _(
        "A failure recorded as a message. (Failures are normally turn steps that end "
        "in a fallback reply and an escalation — see the turn's steps below.)"
    ),
}

# Kinds the customer can see; every other kind is internal (staff only).
VISIBLE_KINDS = frozenset(
    {Kind.TEXT, Kind.CONFIRMATION_REQUEST, Kind.HANDOFF, Kind.NOTICE, Kind.CLARIFICATION}
)

# Which kinds a conversation can contain — the one place the legend reads it from. A mode or
# step that writes a new kind adds it here (and its words to KIND_EXPLANATIONS).
# Kinds every turn may write, whatever the mode: the reply, the confirmation of a risky action,
# the guards, the tools, a hand-off.
ANY_MODE_KINDS: tuple[str, ...] = (
    Kind.TEXT,
    Kind.CONFIRMATION_REQUEST,
    Kind.HANDOFF,
    Kind.NOTICE,
    Kind.GUARD,
    Kind.TOOL_CALL,
    Kind.TOOL_RESULT,
    Kind.ESCALATION,
)


# Kinds only some modes write (the mode recorded on a turn): each mode declares them
# (`Mode.message_kinds`, apps/reasoning/modes/).
def mode_kinds(mode: str) -> tuple[str, ...]:
    try:
        return modes.get(mode).message_kinds
    except modes.UnknownMode:
        return ()


# Kinds a plan setting switches on in any mode: kind → the Plan's boolean field (a field the
# plan does not have yet counts as off).
PLAN_SWITCHED_KINDS: dict[str, str] = {
    Kind.EVALUATION: "evaluation_enabled",
}


@dataclass(frozen=True)
class LegendEntry:
    kind: str
    label: str
    explanation: str
    customer_sees: bool


def kinds_that_can_occur(
    *, modes: Iterable[str], plan: Plan | None, present: Iterable[str] = ()
) -> set[str]:
    """The kinds a conversation whose turns ran in `modes` under `plan` can contain, plus any
    kind it does contain (`present`), so the legend never leaves out a message on the page."""
    kinds = set(ANY_MODE_KINDS) | set(present)
    for mode in modes:
        kinds.update(mode_kinds(mode))
    kinds.update(
        kind
        for kind, field_name in PLAN_SWITCHED_KINDS.items()
        if plan is not None and getattr(plan, field_name, False)
    )
    return kinds


def legend_entries(kinds: set[str] | None = None) -> list[LegendEntry]:
    """The legend, in the order of `Kind`; only `kinds` when given."""
    return [
        LegendEntry(
            kind=value,
            label=str(label),
            explanation=str(KIND_EXPLANATIONS.get(value, "")),
            customer_sees=value in VISIBLE_KINDS,
        )
        for value, label in Kind.choices
        if kinds is None or value in kinds
    ]


# ---------------------------------------------------------------------------------------------
# Debug view rows.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageRow:
    message: Message
    internal: bool
    data_json: str
    turn_number: int | None
    turn_anchor: str


@dataclass(frozen=True)
class StepRow:
    step: ReasoningStep
    output_json: str
    rendered: SafeString | str = ""  # the step as its view says (apps/reasoning/rendering.py)


@dataclass(frozen=True)
class ReasoningCard:
    """One step of a deliberative turn's loop, as a card: scores, rationale, feedback."""

    step: int
    max_steps: int
    status: str
    content: str
    scores: list[tuple[str, float]]
    mean: float
    rationale: str
    feedback: str
    hypotheses: list[dict[str, Any]]


@dataclass(frozen=True)
class DeliberationView:
    cards: list[ReasoningCard]
    refinement: list[dict[str, Any]]  # the refinement states, in order
    end: dict[str, Any] | None
    clarify: dict[str, Any] | None


def deliberation_view(steps: list[ReasoningStep]) -> DeliberationView | None:
    """A deliberative turn's loop, refinement and ending, from its trace steps (already
    loaded); None for a turn of another mode."""
    feedback = {
        s.output.get("step"): str(s.output.get("feedback", ""))
        for s in steps
        if s.name in ("feedback", "feedback_note") and not s.error
    }
    cards = [
        ReasoningCard(
            step=int(o.get("step", 0)),
            max_steps=int(o.get("max_steps", 0)),
            status=str(o.get("status", "")),
            content=str(o.get("content", "")),
            scores=[(str(k), float(v)) for k, v in (o.get("scores") or {}).items()],
            mean=float(o.get("mean", 0.0)),
            rationale=str(o.get("rationale", "")),
            feedback=feedback.get(o.get("step"), ""),
            hypotheses=list(o.get("hypotheses") or []),
        )
        for s in steps
        if s.name == "reason_step" and not s.error and "step" in (o := s.output)
    ]
    refinement = [s.output for s in steps if s.name == "refinement"]
    end = next((s.output for s in steps if s.name == "deliberation_end"), None)
    clarify = next((s.output for s in steps if s.name == "clarify" and not s.error), None)
    if not (cards or refinement or end or clarify):
        return None
    return DeliberationView(cards=cards, refinement=refinement, end=end, clarify=clarify)


@dataclass(frozen=True)
class TurnRow:
    number: int
    anchor: str
    trace: ReasoningTrace
    steps: list[StepRow]
    total_tokens: int
    deliberation: DeliberationView | None = None
    notes: list[InjectedNote] = field(default_factory=list)  # the notes its prompt carried
    # Why a limit ran the turn adaptive instead of deliberative, in words ('' when none did).
    downgraded: str = ""


def _turn_row(number: int, trace: ReasoningTrace, notes: list[InjectedNote]) -> TurnRow:
    """The debug view's row for the turn `trace` (its steps prefetched)."""
    steps = [
        StepRow(step=s, output_json=pretty_json(s.output), rendered=step_html(s))
        for s in trace.steps.all()
    ]
    return TurnRow(
        number=number,
        anchor=f"turn-{trace.pk}",
        trace=trace,
        steps=steps,
        total_tokens=trace.prompt_tokens + trace.completion_tokens,
        deliberation=deliberation_view(list(trace.steps.all())),
        notes=notes,
        downgraded=next(
            (
                deliberative_cap_text(s.output or {})
                for s in trace.steps.all()
                if s.name == DELIBERATIVE_CAP_STEP
            ),
            "",
        ),
    )


def _message_rows(conversation: Conversation, traces: list[ReasoningTrace]) -> list[MessageRow]:
    """The conversation's messages, each linked to the turn that wrote it or that it started."""
    number_by_trace = {trace.pk: number for number, trace in enumerate(traces, start=1)}
    trace_by_user_message = {
        # A conversation's traces are its turns.
        trace.user_message_id: trace.pk
        for trace in traces
        if trace.user_message_id is not None
    }
    rows: list[MessageRow] = []
    messages = (
        Message.objects.filter(conversation=conversation).select_related("author").order_by("seq")
    )
    for message in messages:
        trace_pk = message.trace_id or trace_by_user_message.get(message.pk)
        rows.append(
            MessageRow(
                message=message,
                internal=message.visibility == Visibility.INTERNAL,
                data_json=pretty_json(message.data),
                turn_number=number_by_trace.get(trace_pk) if trace_pk else None,
                turn_anchor=f"turn-{trace_pk}" if trace_pk else "",
            )
        )
    return rows


def debug_context(conversation: Conversation) -> dict[str, Any]:
    """Everything the debug view shows, in five queries whatever the conversation's size:
    messages (+ author), turns (+ customer message), their steps, escalations (+ users) — and
    one more for the notes the turns' prompts carried, when any did."""
    traces = list(
        ReasoningTrace.objects.filter(conversation=conversation)
        .select_related("user_message")
        .prefetch_related("steps")
        .order_by("created_at", "pk")
    )
    notes = injected_notes(
        client=conversation.client, steps_by_trace={t.pk: t.steps.all() for t in traces}
    )
    turns = [
        _turn_row(number, trace, notes.get(trace.pk, []))
        for number, trace in enumerate(traces, start=1)
    ]
    rows = _message_rows(conversation, traces)
    escalations = list(
        Escalation.objects.filter(conversation=conversation)
        .select_related("assigned_to", "resolved_by")
        .order_by("-created_at", "-pk")
    )
    # The legend explains the kinds this conversation can hold: those of the modes its turns
    # ran in and of the mode its plan runs now (the next turn's), and any it does hold.
    plan = conversation.client.plan
    modes = {trace.mode for trace in traces} | {mode_that_runs(plan.ai_mode)}
    kinds = kinds_that_can_occur(modes=modes, plan=plan, present={row.message.kind for row in rows})
    return {
        "legend": legend_entries(kinds),
        "legend_modes": sorted(modes),
        "message_rows": rows,
        "internal_count": sum(1 for row in rows if row.internal),
        "turns": turns,
        "escalations": escalations,
        "open_escalation": next(
            (e for e in escalations if e.status == EscalationStatus.OPEN), None
        ),
    }


# ---------------------------------------------------------------------------------------------
# Conversation admin.
# ---------------------------------------------------------------------------------------------


@admin.register(Conversation)
class ConversationAdmin(ActionOnlyAdmin):
    change_form_template = "admin/conversations/conversation/change_form.html"
    list_display = [
        "public_id",
        "client",
        "status",
        "visitor",
        "customer",
        "message_count",
        "last_message_at",
        "has_open_escalation",
        "created_at",
    ]
    list_display_links = ["public_id"]
    list_filter = ["status", ("client", admin.RelatedOnlyFieldListFilter), "created_at"]
    list_select_related = ["client"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    # A pasted public id is matched exactly in get_search_results (UUIDs are stored differently
    # per database, so a text search on them is unreliable).
    search_fields = ["visitor_id", "customer_id", "contact_email", "messages__text"]
    search_help_text = _(
        "Search by conversation id, visitor id, verified customer id, the customer's e-mail or "
        "any message text."
    )
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "public_id",
                    "client",
                    "status",
                    "visitor_id",
                    "contact_email",
                    "contact_email_confirmed_at",
                    "language",
                ]
            },
        ),
        (
            _("Verified customer"),
            {
                "fields": [
                    "customer_id",
                    "customer_email",
                    "customer_name",
                    "customer_verified_via",
                    "customer_verified_at",
                ],
                "description": _(
                    "Who the customer proved to be (a signed id from the business's site, or a "
                    "one-time code sent to the address on file). Empty: not verified."
                ),
            },
        ),
        (
            _("Activity"),
            {
                "fields": [
                    "created_at",
                    "last_message_at",
                    "message_count",
                    "customer_seen",
                    "reply_emailed_at",
                    "outcome",
                ]
            },
        ),
    ]
    # The page only shows: every field it lists is read-only.
    readonly_fields = flatten_fieldsets(fieldsets)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return (
            super()
            .get_queryset(request)
            .select_related("client", "client__plan")
            .annotate(message_total=message_count(), open_escalation=open_escalation())
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        try:
            public_id = uuid.UUID(search_term.strip())
        except ValueError:
            return results, may_have_duplicates
        matched = queryset.filter(Q(public_id=public_id) | Q(pk__in=results.values("pk")))
        return matched, False

    @admin.display(description=_("Visitor"), ordering="visitor_id")
    def visitor(self, obj: Conversation) -> str:
        return obj.visitor_id or gettext("anonymous")

    @admin.display(description=_("Customer"))
    def customer(self, obj: Conversation) -> str:
        if not obj.customer_verified:
            return "—"
        return gettext("%(id)s (verified)") % {"id": obj.customer_id}

    @admin.display(description=_("Outcome"))
    def outcome(self, obj: Conversation) -> str:
        """The one judgement once it ended (apps/outcomes: `conversation.resolved`)."""
        record = ConversationResolution.objects.for_client(obj.client).filter(conversation=obj)
        judged = record.first()
        if judged is None:
            return gettext("not judged yet (it has not ended)")
        when = timezone.localtime(judged.resolved_at or judged.created_at).strftime(
            "%Y-%m-%d %H:%M"
        )
        if judged.resolved:
            return gettext("resolved by the assistant (its last answer %(when)s)") % {"when": when}
        return gettext("not resolved by the assistant (judged %(when)s)") % {"when": when}

    @admin.display(description=_("Seen by the customer"))
    def customer_seen(self, obj: Conversation) -> str:
        if obj.customer_seen_at is None:
            return "—"
        when = timezone.localtime(obj.customer_seen_at).strftime("%Y-%m-%d %H:%M")
        return gettext("up to message #%(seq)s, %(when)s") % {
            "seq": obj.customer_seen_seq,
            "when": when,
        }

    @admin.display(description=_("Messages"), ordering="message_total")
    def message_count(self, obj: Conversation) -> int:
        return int(getattr(obj, "message_total", 0))

    @admin.display(description=_("Open escalation"), boolean=True, ordering="open_escalation")
    def has_open_escalation(self, obj: Conversation) -> bool:
        return bool(getattr(obj, "open_escalation", False))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        conversation = self.get_object(request, object_id)
        if conversation is not None and self.has_view_permission(request, conversation):
            context.update(debug_context(conversation))
            # The page is read-only; say so plainly instead of "View conversation".
            context["title"] = gettext("Conversation %(id)s") % {"id": conversation.public_id}
            # The admin repeats the object's name under the title; here it is the title.
            context["subtitle"] = None
        return super().change_view(request, object_id, form_url, extra_context=context)
