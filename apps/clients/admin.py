from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.text import capfirst
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import Membership
from apps.api.admin import PlatformOnlyAdmin, ReadOnlyInline, TenantScopedAdmin, pretty_json_block
from apps.api.permissions import MANAGE, user_may
from apps.clients import modes
from apps.clients.business_info import business_info_errors
from apps.clients.deliberation import (
    DELIBERATION_ROWS,
    MAX_REFINEMENT_ITERATIONS,
    deliberation_settings,
    deliberation_settings_set,
)
from apps.clients.identity import (
    ROTATION_GRACE,
    client_identity_secret_rotate,
    public_key_problem,
)
from apps.clients.models import Client, Plan, Rubric
from apps.core.languages import SHIPPED
from apps.reasoning.hooks import hook_names
from apps.tools.models import ClientTool

_AI_MODE_HELP_HEAD = _("""<p>How the assistant thinks for every client on this plan. All modes use
the same model; they differ in process, safety and cost.</p>""")
_AI_MODE_HELP_COLUMNS = (
    _("Mode"),
    _("What happens on each customer message"),
    pgettext_lazy("mode help column", "LLM calls"),
    _("Cost effect"),
)
_AI_MODE_HELP_FOOT = _("""<p>The <strong>multipliers</strong> set what the client is billed:
provider cost × the multiplier of the mode that ran (e.g. 1.5 means a message that cost us $0.010
is billed $0.015).</p>""")


def ai_mode_help() -> str:
    """The plan admin's AI mode help: one row per registered mode, from what the mode declares
    (`Mode.help`), in the page's language."""
    head = "".join(f"<th>{column}</th>" for column in _AI_MODE_HELP_COLUMNS)
    rows = []
    for mode in modes.modes():
        name = gettext(mode.label).split(" — ")[0]
        note = f" {gettext(mode.help.note)}" if mode.help.note else ""
        cells = (mode.help.happens, mode.help.llm_calls, mode.help.cost_effect)
        rows.append(
            f"<tr><td><strong>{name}</strong>{note}</td>"
            + "".join(f"<td>{gettext(cell)}</td>" for cell in cells)
            + "</tr>"
        )
    return (
        f'{_AI_MODE_HELP_HEAD}\n<table style="max-width:60rem"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>\n{_AI_MODE_HELP_FOOT}"
    )


AI_MODE_HELP = lazy(ai_mode_help, str)()


EVALUATION_HELP = _("""
<p>When on, every knowledge answer (no tool, or a read-only tool) longer than the character
threshold and at or above the confidence threshold gets a second LLM call, <code>evaluate</code>,
that checks it against the business info and tool result it used. The rules, enforced in code:
a better answer with higher confidence <strong>replaces</strong> the draft; a
<strong>validated</strong> draft's confidence rises 10 % (max 100 %); a <strong>questioned</strong>
one's falls 30 % — and goes to a person instead of the customer if that puts it below the
hand-over threshold; a failed check sends the draft unchanged. Confirmation requests, hand-offs
and answers after actions are never evaluated. Runs before the extra checks below; billed as
step <code>evaluate</code> at the mode's multiplier (about one more AI call per checked
answer).</p>
""")


# What each post-draft hook does, in a support lead's words (the stored value stays the hook's
# name: the import format and the API use it). A hook without words here fails a test.
HOOK_LABELS: dict[str, Any] = {
    "handoff_when_unsure": _(
        "Hand the conversation to a person when the assistant is unsure of its reply "
        "(it rates its own confidence below 4 out of 10)"
    ),
}


def _hook_choices() -> list[tuple[str, Any]]:
    return [(name, HOOK_LABELS.get(name, name)) for name in hook_names()]


def _step_row(label: Any, help_text: Any) -> forms.IntegerField:
    """MIN or MAX: empty inherits the rubric's; 0 and above 20 are refused by `Plan.clean`."""
    return forms.IntegerField(
        label=capfirst(label), min_value=0, required=False, help_text=help_text
    )


def _deliberation_rows() -> dict[str, forms.Field]:
    """One form row per deliberative setting (`Plan.deliberation`, apps/clients/deliberation.py);
    the step and target bounds against the rubric are checked by `Plan.clean`."""
    return {
        "deliberation_min_steps": _step_row(
            _("minimum steps"), _("Overrides the rubric's MIN (1–20); empty = the rubric's.")
        ),
        "deliberation_max_steps": _step_row(
            _("maximum steps"), _("Overrides the rubric's MAX (MIN–20); empty = the rubric's.")
        ),
        "deliberation_target": forms.DecimalField(
            label=capfirst(_("target score")),
            max_digits=4,
            decimal_places=3,
            required=False,
            help_text=_("Overrides the rubric's TARGET (0 < target ≤ 1); empty = the rubric's."),
        ),
        "refinement_iterations": forms.IntegerField(
            label=capfirst(_("refinement iterations")),
            min_value=0,
            max_value=MAX_REFINEMENT_ITERATIONS,
            help_text=_(
                "Critique → improve rounds after the answer is written (0 = off, at most 5); "
                "each round is two LLM calls."
            ),
        ),
        "refinement_stop_score": forms.IntegerField(
            label=capfirst(_("refinement stop score")),
            min_value=1,
            max_value=100,
            help_text=_(
                "Refinement stops early once a critique scores the answer at least this (1–100)."
            ),
        ),
    }


class PlanAdminForm(forms.ModelForm):
    post_draft_hooks = forms.MultipleChoiceField(
        choices=_hook_choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=_("Extra checks before a reply is sent"),
        help_text=_(
            "Checks that run after the assistant has written a reply and before the customer "
            "sees it; each may replace the reply, lower its confidence or hand the conversation "
            "to a person. A check that fails never loses the reply. None ticked = none run."
        ),
    )

    class Meta:
        model = Plan
        fields = ["post_draft_hooks"]  # the admin adds the fieldsets' fields

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = self.instance.mode_multipliers
        for name in modes.names():
            if multiplier_field(name) in self.fields:
                self.initial.setdefault(multiplier_field(name), current[name])
        own = deliberation_settings(self.instance).model_dump()
        for key, row in DELIBERATION_ROWS.items():
            self.initial.setdefault(row, own[key])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # One row per registered mode → Plan.multipliers (mode name → decimal string); an empty
        # row bills that mode at its default.
        multipliers = dict(self.instance.multipliers or {})
        for name in modes.names():
            if multiplier_field(name) not in self.fields:
                continue
            value = cleaned.get(multiplier_field(name))
            if value is None:
                multipliers.pop(name, None)
            else:
                multipliers[name] = modes.multiplier_text(value)
        self.instance.multipliers = multipliers
        # The deliberative rows → Plan.deliberation (a row that failed its own check is left).
        changes = {key: cleaned[row] for key, row in DELIBERATION_ROWS.items() if row in cleaned}
        deliberation_settings_set(self.instance, **changes)
        return cleaned


def multiplier_field(mode: str) -> str:
    return f"multiplier_{mode}"


def multiplier_form_fields() -> dict[str, forms.Field]:
    """One form row per registered mode (apps/reasoning/modes/): its billing multiplier."""
    return {
        multiplier_field(mode.name): forms.DecimalField(
            label=_("%(mode)s multiplier") % {"mode": mode.name.capitalize()},
            min_value=0,
            max_value=modes.MULTIPLIER_MAX,
            max_digits=6,
            decimal_places=3,
            required=False,
            help_text=_(
                "Billed = provider cost × this, in %(mode)s mode. Empty = the default, %(default)s."
            )
            % {"mode": mode.name, "default": mode.default_multiplier},
        )
        for mode in modes.modes()
    }


@admin.register(Plan)
class PlanAdmin(PlatformOnlyAdmin):
    form = PlanAdminForm
    list_display = ["name", "slug", "ai_mode", "monthly_fee", "included_turns", "client_count"]
    list_filter = ["ai_mode"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    fieldsets = [
        (None, {"fields": ["name", "slug"]}),
        (_("AI mode"), {"fields": ["ai_mode"], "description": AI_MODE_HELP}),
        (
            _("Evaluation — a second opinion on knowledge answers"),
            {
                "fields": [
                    "evaluation_enabled",
                    "evaluation_min_chars",
                    "evaluation_min_confidence",
                    "evaluation_escalate_below",
                ],
                "description": EVALUATION_HELP,
            },
        ),
        (
            _("Deliberative mode"),
            {
                "fields": [
                    "rubric",
                    ("deliberation_min_steps", "deliberation_max_steps", "deliberation_target"),
                    ("refinement_iterations", "refinement_stop_score"),
                    "deliberate_below_confidence",
                ],
                "description": _(
                    "Used when the AI mode is deliberative, or deliberate when needed (when a "
                    "turn deliberates). Empty step and target fields inherit the rubric's "
                    "(1 ≤ MIN ≤ MAX ≤ 20, 0 < target ≤ 1)."
                ),
            },
        ),
        (_("Before a reply is sent"), {"fields": ["post_draft_hooks"]}),
        (_("Outcomes"), {"fields": ["resolution_window_hours"]}),
        (
            _("Privacy"),
            {
                "fields": ["retention_days"],
                "description": _(
                    "How long customers' conversations are kept (docs/privacy.md). Exports and "
                    "erasures on a customer's request: Privacy → Privacy requests."
                ),
            },
        ),
        (
            _("Cross-session notes"),
            {
                "fields": ["notes_enabled", "notes_prompt_budget_tokens", "notes_retention_days"],
                "description": _(
                    "What the assistant learned in earlier conversations (tool "
                    "failures, escalations, approved patterns) is added to its prompts, newest "
                    "first, "
                    "within the token budget. AI-proposed patterns, strategies and tips wait for "
                    "staff approval before they reach a prompt."
                ),
            },
        ),
        (
            _("Billing multipliers (billed = provider cost × multiplier of the mode that ran)"),
            {"fields": []},  # one row per registered mode: get_fieldsets
        ),
        (
            _("Price and limits"),
            {
                "fields": [
                    "monthly_fee",
                    "included_turns",
                    "monthly_turn_budget",
                    "monthly_token_budget",
                    "per_turn_token_cap",
                    "simulation_monthly_tokens",
                ]
            },
        ),
        (
            _("Per-visitor limits"),
            {
                "fields": [
                    "conversation_token_budget",
                    "visitor_daily_token_budget",
                    "deliberative_turns_per_hour",
                ],
                "description": _(
                    "So that no single visitor can use up the monthly budget: past the "
                    "conversation budget or the daily visitor budget the conversation goes to "
                    "your team; past the hourly number of deliberative answers, the conversation "
                    "is answered in adaptive mode."
                ),
            },
        ),
    ]

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "ai_mode":
            kwargs["widget"] = forms.RadioSelect
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        rows = list(multiplier_form_fields())
        return [
            (title, {**options, "fields": rows})
            if options.get("fields") == []
            else (title, options)
            for title, options in super().get_fieldsets(request, obj)
        ]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        # The multiplier rows are declared per registered mode, when the page is built; the
        # deliberative rows stand for keys of one JSON field.
        rows = {**multiplier_form_fields(), **_deliberation_rows()}
        kwargs["form"] = type("PlanAdminForm", (self.form,), rows)
        return super().get_form(request, obj, change, **kwargs)

    @admin.display(description=_("Clients"))
    def client_count(self, obj: Plan) -> int:
        return obj.clients.count()


class RubricAdminForm(forms.ModelForm):
    principles = forms.JSONField(
        label=_("Principles"),
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100, "style": "font-family:monospace"}),
        help_text=_(
            'A JSON list of {"key", "label", "definition"}. Each reasoning step scores '
            "itself 0–1 on every key; the definitions are given to the feedback call every time."
        ),
    )

    class Meta:
        model = Rubric
        fields = ["name", "slug", "description", "principles", "min_steps", "max_steps", "target"]


@admin.register(Rubric)
class RubricAdmin(PlatformOnlyAdmin):
    """Deliberative mode's rubrics (platform data; plans and clients choose one)."""

    form = RubricAdminForm
    list_display = ["name", "slug", "min_steps", "max_steps", "target", "principle_keys"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}

    @admin.display(description=_("Principles"))
    def principle_keys(self, obj: Rubric) -> str:
        return ", ".join(p.get("key", "?") for p in obj.principles if isinstance(p, dict))


class PrettyJSONField(forms.JSONField):
    def prepare_value(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


# The business basics as form fields: (form field, path in business_info, limit, label, rows).
# FAQs are articles of the knowledge base (admin → Knowledge → FAQs), not part of this form.
BASICS: list[tuple[str, tuple[str, ...], int, Any, int]] = [
    ("about_description", ("about", "description"), 1000, _("About: in short"), 2),
    ("about_full", ("about", "full"), 20000, _("About: the full story"), 6),
    ("contact_email", ("contact", "email"), 254, _("Contact e-mail"), 0),
    ("contact_phone", ("contact", "phone"), 500, _("Contact phone"), 0),
    ("contact_hours", ("contact", "hours"), 500, _("Opening hours"), 0),
    ("contact_address", ("contact", "address"), 500, _("Address"), 2),
    ("policy_returns", ("policies", "returns"), 20000, _("Returns policy"), 6),
    ("policy_shipping", ("policies", "shipping"), 20000, _("Shipping policy"), 6),
    ("policy_privacy", ("policies", "privacy"), 20000, _("Privacy policy"), 6),
    ("policy_terms", ("policies", "terms"), 20000, _("Terms"), 6),
    ("ai_instructions", ("ai_instructions",), 5000, _("Instructions for the assistant"), 4),
]
BASICS_HELP = {
    "about_description": _("One or two sentences; always in the assistant's prompt."),
    "about_full": _("Fetched by the assistant when a question needs it."),
    "ai_instructions": _(
        "Tone and rules for the assistant, e.g. 'Answer in two sentences at most.'"
    ),
}


def basic_value(info: Any, path: tuple[str, ...]) -> str:
    value: Any = info if isinstance(info, dict) else {}
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else ""


def with_basics(info: Any, values: dict[str, str]) -> dict[str, Any]:
    """`info` with the basics set from the form (an emptied field removes its key, an emptied
    section its object); every other key — FAQs of a document not yet migrated, anything the
    form does not show — is kept as it was."""
    out: dict[str, Any] = {
        key: (dict(value) if isinstance(value, dict) else value)
        for key, value in (info if isinstance(info, dict) else {}).items()
    }
    for name, path, _limit, _label, _rows in BASICS:
        text = (values.get(name) or "").strip()
        if len(path) == 1:
            if text:
                out[path[0]] = text
            else:
                out.pop(path[0], None)
            continue
        section, key = path
        existing = out.get(section)
        part: dict[str, Any] = existing if isinstance(existing, dict) else {}
        if text:
            part[key] = text
        else:
            part.pop(key, None)
        if part:
            out[section] = part
        else:
            out.pop(section, None)
    return out


def _basic_field(name: str) -> forms.CharField:
    _name, _path, limit, label, rows = next(b for b in BASICS if b[0] == name)
    widget = (
        forms.Textarea(attrs={"rows": rows, "cols": 80})
        if rows
        else forms.TextInput(attrs={"size": 60})
    )
    return forms.CharField(
        label=label,
        required=False,
        max_length=limit,
        widget=widget,
        help_text=BASICS_HELP.get(name, ""),
    )


_SHIPPED_CHOICES = [
    (code, dict(settings.LANGUAGES).get(code, name)) for code, name in SHIPPED.items()
]


class ClientAdminForm(forms.ModelForm):
    about_description = _basic_field("about_description")
    about_full = _basic_field("about_full")
    contact_email = _basic_field("contact_email")
    contact_phone = _basic_field("contact_phone")
    contact_hours = _basic_field("contact_hours")
    contact_address = _basic_field("contact_address")
    policy_returns = _basic_field("policy_returns")
    policy_shipping = _basic_field("policy_shipping")
    policy_privacy = _basic_field("policy_privacy")
    policy_terms = _basic_field("policy_terms")
    ai_instructions = _basic_field("ai_instructions")
    allowed_origins = PrettyJSONField(
        label=_("Allowed origins"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "style": "font-family:monospace"}),
        help_text=_('A JSON list, e.g. ["https://shop.example"].'),
    )
    business_hours = PrettyJSONField(
        label=_("Business hours"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 60, "style": "font-family:monospace"}),
        help_text=Client._meta.get_field("business_hours").help_text,
    )
    # The shipped languages only (apps.core.languages.SHIPPED): the widget, the confirmation
    # phrasings and the translations exist for these. Each is named in itself ("Español"), as
    # language pickers do and as settings.LANGUAGES names them for the staff's own choice.
    language = forms.ChoiceField(
        label=_("Default language"),
        choices=_SHIPPED_CHOICES,
        help_text=_("The language the assistant replies in when the customer's is not allowed."),
    )
    languages = forms.MultipleChoiceField(
        label=_("Allowed languages"),
        choices=_SHIPPED_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_(
            "The languages the assistant answers in (a customer is answered in theirs when it "
            "is one of these). None ticked: only the default language."
        ),
    )

    identity_secret_action = forms.ChoiceField(
        label=_("Identity secret"),
        required=False,
        choices=[
            ("", "—"),
            (
                "rotate",
                _("Generate a new secret (the current one keeps working for 24 hours)"),
            ),
            ("rotate_now", _("Generate a new secret (the current one stops working now)")),
        ],
        help_text=_(
            "Your site's backend signs the signed-in customer's id with it (docs/widget.md, "
            "“Identity verification”). Shown once after saving; never shown again."
        ),
    )

    class Meta:
        model = Client
        fields = [
            "name",
            "slug",
            "plan",
            "is_active",
            "language",
            "languages",
            "support_email",
            "business_hours",
            "greeting",
            "show_sources",
            "remember_conversation_hours",
            "allowed_origins",
            "rubric",
            "playground_modes",
            "playground_max_iterations",
            "identity_public_key",
            "signin_url",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        info = self.instance.business_info if self.instance else {}
        for name, path, *_rest in BASICS:
            if name in self.fields:
                self.initial.setdefault(name, basic_value(info, path))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        allowed = [code for code in SHIPPED if code in (data.get("languages") or [])]
        default = data.get("language")
        if allowed and default and default not in allowed:
            allowed.insert(0, default)  # the default is always answered in
        data["languages"] = allowed
        if any(name in self.errors for name, *_rest in BASICS):
            return data
        info = with_basics(self.instance.business_info, data)
        errors = business_info_errors(info)
        by_path = {".".join(path): name for name, path, *_rest in BASICS}
        for path, message in errors.items():
            self.add_error(by_path.get(path), f"{path}: {message}")
        if not errors:
            self.instance.business_info = info
        return data

    def clean_allowed_origins(self) -> Any:
        return self.cleaned_data.get("allowed_origins") or []

    def clean_business_hours(self) -> Any:
        return self.cleaned_data.get("business_hours") or {}  # emptied: no business hours

    def clean_identity_public_key(self) -> str:
        pem = (self.cleaned_data.get("identity_public_key") or "").strip()
        if pem and public_key_problem(pem):
            raise forms.ValidationError(
                gettext("Paste an RSA public key in PEM form (-----BEGIN PUBLIC KEY-----).")
            )
        return pem


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]
    fk_name = "client"

    # Who may act for a client is the platform's decision (see MembershipAdmin).
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)


class ToolInline(ReadOnlyInline):
    """The client's tools at a glance. Read-only here: a tool is changed on its own page, with
    its validated form and the admin role the rule asks for (apps/api/permissions.py)."""

    model = ClientTool
    fk_name = "client"
    fields = ("name", "kind", "executor_type", "enabled")
    readonly_fields = fields
    show_change_link = True

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # `obj` is the client whose page is shown (None when Django filters the rows of an
        # inline it already decided to show for that client).
        return super().has_view_permission(request, obj) and (
            obj is None or user_may(request.user, obj.pk, MANAGE)
        )


@admin.register(Client)
class ClientAdmin(TenantScopedAdmin):
    """Members see their clients; admins and owners change the client's settings; creating or
    deleting a client, and its plan, slug and active flag, are the platform's."""

    client_lookup = "pk"
    form = ClientAdminForm
    list_display = ["name", "slug", "plan", "mode", "is_active", "support_email"]
    list_filter = ["is_active", "plan"]
    search_fields = ["name", "slug", "support_email"]
    readonly_fields = [
        "widget_key",
        "embed_snippet",
        "business_info_json",
        "identity_status",
        "created_at",
        "updated_at",
    ]
    list_select_related = ["plan"]
    inlines = [MembershipInline, ToolInline]
    fieldsets = [
        (None, {"fields": ["name", "slug", "plan", "is_active", "support_email"]}),
        (_("Languages"), {"fields": ["language", "languages"]}),
        (_("Staff sign-in"), {"fields": ["require_mfa"]}),
        (
            _("What the assistant knows: the business basics"),
            {
                "fields": [name for name, *_rest in BASICS],
                "description": _(
                    "Articles and FAQs are edited under Knowledge (articles, FAQs, sources)."
                ),
            },
        ),
        (
            _("Advanced: the business info document"),
            {"fields": ["business_info_json"], "classes": ["collapse"]},
        ),
        (
            _("Business hours"),
            {
                "fields": ["business_hours"],
                "description": _(
                    "When a person answers a hand-off: outside these hours the customer is told "
                    "when the team is back and asked for an e-mail address; inside them, the "
                    "team's typical wait (the last 7 days' median) when there is enough data."
                ),
            },
        ),
        (
            _("Deliberative mode"),
            {
                "fields": ["rubric"],
                "description": _(
                    "The rubric the assistant's reasoning steps score themselves "
                    "against when the plan is deliberative; empty = the plan's."
                ),
            },
        ),
        (
            _("Widget"),
            {
                "fields": [
                    "greeting",
                    "show_sources",
                    "remember_conversation_hours",
                    "allowed_origins",
                    "widget_key",
                    "embed_snippet",
                ]
            },
        ),
        (
            _("Identity verification"),
            {
                "fields": [
                    "identity_status",
                    "identity_secret_action",
                    "identity_public_key",
                    "signin_url",
                ],
                "description": _(
                    "Let the widget know which of your customers is chatting: your site signs "
                    "the signed-in customer's id (or a short-lived token) with the identity "
                    "secret. Tools marked “customer scoped” run only for a verified customer."
                ),
            },
        ),
        (
            _("Playground"),
            {
                "fields": [
                    "playground_modes",
                    "playground_max_iterations",
                    "simulation_monthly_tokens",
                ],
                "description": _(
                    "What this client's staff may try in the playground beyond the plan "
                    "(granted by the platform): extra modes, and more refinement rounds."
                ),
            },
        ),
        (_("History"), {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser) and super().has_add_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser) and super().has_delete_permission(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            # commercial terms are the platform's, and so are playground grants beyond the plan
            readonly += [
                "plan",
                "slug",
                "is_active",
                "playground_modes",
                "playground_max_iterations",
                "simulation_monthly_tokens",
            ]
        return readonly

    # What a member who may not change the client sees of the basics (read-only).
    def _basic(self, obj: Client, path: tuple[str, ...]) -> str:
        return basic_value(obj.business_info, path) or "-"

    @admin.display(description=_("Business info (JSON)"))
    def business_info_json(self, obj: Client) -> Any:
        """The stored document, read-only (the import/export format is the tenant file)."""
        return pretty_json_block(obj.business_info)

    @admin.display(description=_("Identity secret status"))
    def identity_status(self, obj: Client) -> str:
        if not obj.pk or not obj.identity_secret:
            return gettext("No identity secret yet: no customer can be verified.")
        previous = obj.identity_previous_secret_expires_at
        if obj.identity_previous_secret and previous and previous > timezone.now():
            return gettext("Identity secret set; the previous one also works until %(until)s.") % {
                "until": date_format(timezone.localtime(previous), "DATETIME_FORMAT")
            }
        return gettext("Identity secret set.")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        action = form.cleaned_data.get("identity_secret_action")
        if action in {"rotate", "rotate_now"}:
            grace = ROTATION_GRACE if action == "rotate" else timedelta(0)
            secret = client_identity_secret_rotate(client=obj, grace=grace)
            # Shown this once (like an API key): the business's backend needs it now.
            self.message_user(
                request,
                gettext(
                    "New identity secret for %(name)s: %(secret)s — copy it now, it will not "
                    "be shown again."
                )
                % {"name": obj.name, "secret": secret},
                messages.WARNING,
            )

    @admin.display(description=_("AI mode"))
    def mode(self, obj: Client) -> str:
        return obj.plan.get_ai_mode_display().split(" —")[0]

    @admin.display(description=_("Embed snippet"))
    def embed_snippet(self, obj: Client) -> str:
        if not obj.pk:
            return "-"
        return format_html(
            '<code>&lt;script src="https://YOUR-GUIDEDESK-HOST/static/widget.js" '
            'data-widget-key="{}" async&gt;&lt;/script&gt;</code>',
            obj.widget_key,
        )


def _basic_display(name: str, path: tuple[str, ...], label: Any) -> Any:
    @admin.display(description=label)
    def show(self: ClientAdmin, obj: Client) -> str:
        return self._basic(obj, path)

    show.__name__ = name
    return show


for _name, _path, _limit, _label, _rows in BASICS:
    setattr(ClientAdmin, _name, _basic_display(_name, _path, _label))
