"""Simulations in the admin: test cases (edited as JSON, validated by the case format), a "New
simulation" form (cases by suite or tag, or a replay of saved conversations by preset, against a
candidate configuration) and each run's report — baseline and candidate side by side.

Roles (apps/api/permissions.py): viewers read cases, runs and reports; agents edit cases and
start or stop runs, as in the playground and the API."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from apps.api.admin import TenantScopedAdmin, pretty_json
from apps.api.permissions import READ, SUPPORT
from apps.api.resolver import resolver
from apps.billing.selectors import simulation_budget_status
from apps.clients import modes
from apps.clients.models import Client, Rubric
from apps.core.exceptions import ApplicationError
from apps.notes.models import Note, NoteStatus
from apps.simulations.cases import CASE_FIELDS, simcase_create, simcase_update
from apps.simulations.models import (
    CaseRun,
    RunKind,
    RunSource,
    SimCase,
    SimulationRun,
)
from apps.simulations.report_words import comparisons, side_table, what_changed
from apps.simulations.schema import case_validate
from apps.simulations.serializers import run_progress
from apps.simulations.services import (
    RunEstimate,
    simulation_run_create,
    simulation_run_estimate,
    simulation_run_stop,
)

JSON_FIELDS = ("tags", "history", "turns", "simulated", "expect", "criteria", "tools")

# ------------------------------------------------------------------------------------- cases


class PrettyJSONField(forms.JSONField):
    """A JSON textarea that shows its value indented and names a syntax error's place."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class SimCaseForm(forms.ModelForm):
    """Every JSON field edited as text; the whole case checked by `case_validate`, each error
    shown on the field it belongs to (`turns[1].expect.tool_called: …` under Turns)."""

    class Meta:
        model = SimCase
        fields = ["client", *CASE_FIELDS]
        field_classes = dict.fromkeys(JSON_FIELDS, PrettyJSONField)
        widgets = {
            name: forms.Textarea(attrs={"rows": 8, "cols": 90, "class": "vLargeTextField"})
            for name in JSON_FIELDS
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        data = {field: cleaned.get(field) for field in CASE_FIELDS if field in cleaned}
        data = {k: v for k, v in data.items() if v is not None}
        try:
            self.normalized = case_validate(data)
        except ApplicationError as exc:
            fields = (exc.extra or {}).get("fields") or {}
            if not fields:
                raise forms.ValidationError(exc.message) from None
            for where, message in fields.items():
                top = str(where).split(".")[0].split("[")[0]
                target = top if top in self.fields else None
                self.add_error(target, f"{where}: {message}" if where != top else str(message))
        return cleaned


class TagFilter(admin.SimpleListFilter):
    title = gettext_lazy("tag")
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tags: set[str] = set()
        for row in model_admin.get_queryset(request).values_list("tags", flat=True):
            tags.update(str(tag) for tag in (row or []))
        return [(tag, tag) for tag in sorted(tags)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        tag = self.value()
        if not tag:
            return queryset
        # JSON containment is not portable (SQLite); suites are small enough to filter here.
        ids = [pk for pk, tags in queryset.values_list("pk", "tags") if tag in (tags or [])]
        return queryset.filter(pk__in=ids)


@admin.register(SimCase)
class SimCaseAdmin(TenantScopedAdmin):
    view_need = READ
    change_need = SUPPORT
    form = SimCaseForm
    list_display = ["name", "suite", "tag_list", "kind_label", "enabled", "client", "updated_at"]
    list_filter = ["suite", TagFilter, "enabled", ("client", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "description"]
    actions = ["run_selected"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A case stays with its client: copy it to another through export and import.
        return ["client"] if obj is not None else []

    @admin.display(description=gettext_lazy("tags"))
    def tag_list(self, obj: SimCase) -> str:
        return ", ".join(map(str, obj.tags or []))

    @admin.display(description=gettext_lazy("customer"))
    def kind_label(self, obj: SimCase) -> str:
        if obj.simulated:
            return _("simulated")
        return _("%(n)d turns") % {"n": len(obj.turns or [])}

    def save_model(self, request: HttpRequest, obj: SimCase, form: Any, change: bool) -> None:
        if not self.role_permits_on(request, obj, self.change_need):
            raise PermissionDenied
        data = {field: form.cleaned_data.get(field) for field in CASE_FIELDS}
        data = {k: v for k, v in data.items() if v is not None}
        if change:
            original = SimCase.objects.for_client(obj.client).get(pk=obj.pk)
            saved = simcase_update(client=obj.client, case=original, data=data)
        else:
            saved = simcase_create(client=obj.client, data=data)
        obj.pk = saved.pk
        obj.public_id = saved.public_id

    @admin.action(description=gettext_lazy("Run selected cases"), permissions=["run"])
    def run_selected(self, request: HttpRequest, queryset: QuerySet[SimCase]) -> Any:
        clients = {case.client_id for case in queryset}
        if len(clients) != 1:
            self.message_user(
                request, _("Pick cases of one client to run them together."), messages.ERROR
            )
            return None
        ids = ",".join(str(case.public_id) for case in queryset)
        url = reverse("admin:simulations_simulationrun_add")
        return HttpResponseRedirect(f"{url}?client={clients.pop()}&cases={ids}")

    def has_run_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.role_permits_on(request, obj, SUPPORT)


# -------------------------------------------------------------------------------------- runs

PRESETS = {
    "last_week_escalated": (gettext_lazy("Last week's escalated conversations"), 7, True, False),
    "last_week_tools": (gettext_lazy("Last week's conversations with a tool call"), 7, False, True),
    "last_month_escalated": (
        gettext_lazy("Last 30 days' escalated conversations"),
        30,
        True,
        False,
    ),
    "custom": (gettext_lazy("Custom (the period and filters below)"), 0, False, False),
}
LIVE = ""


class NewSimulationForm(forms.Form):
    client = forms.ModelChoiceField(queryset=Client.objects.none(), label=gettext_lazy("Client"))
    name = forms.CharField(required=False, max_length=200, label=gettext_lazy("Name"))
    kind = forms.ChoiceField(
        choices=RunKind.choices,
        initial=RunKind.CASES,
        widget=forms.RadioSelect,
        label=gettext_lazy("What to run"),
    )
    # Cases
    suite = forms.SlugField(required=False, label=gettext_lazy("Suite"))
    tags = forms.CharField(
        required=False,
        label=gettext_lazy("Tags"),
        help_text=gettext_lazy("Comma-separated; cases with any of them."),
    )
    cases = forms.CharField(required=False, widget=forms.HiddenInput)
    # Replays
    preset = forms.ChoiceField(
        choices=[(key, label) for key, (label, *_rest) in PRESETS.items()],
        initial="last_week_escalated",
        label=gettext_lazy("Conversations"),
    )
    since = forms.DateField(
        required=False, label=gettext_lazy("From"), widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label=gettext_lazy("Until"), widget=forms.DateInput(attrs={"type": "date"})
    )
    escalated_only = forms.BooleanField(required=False, label=gettext_lazy("Escalated only"))
    with_tool = forms.BooleanField(required=False, label=gettext_lazy("With a tool call"))
    limit = forms.IntegerField(
        min_value=1, max_value=1000, initial=100, label=gettext_lazy("At most")
    )
    # The candidate
    mode = forms.ChoiceField(required=False, label=gettext_lazy("Mode"))
    rubric = forms.ChoiceField(required=False, label=gettext_lazy("Rubric"))
    model = forms.CharField(
        required=False,
        max_length=100,
        label=gettext_lazy("Model"),
        help_text=gettext_lazy("Empty: the live model."),
    )
    evaluation = forms.ChoiceField(
        required=False,
        choices=[
            (LIVE, gettext_lazy("as live")),
            ("on", gettext_lazy("on")),
            ("off", gettext_lazy("off")),
        ],
        label=gettext_lazy("Evaluation"),
    )
    notes = forms.ChoiceField(
        required=False,
        choices=[
            ("live", gettext_lazy("the live notes")),
            ("none", gettext_lazy("no notes")),
            ("pending", gettext_lazy("the live notes and those waiting for review (approve them)")),
        ],
        label=gettext_lazy("Notes"),
    )
    business_info = forms.JSONField(
        required=False,
        label=gettext_lazy("Business info"),
        help_text=gettext_lazy("A whole business info document (JSON); empty: the live one."),
        widget=forms.Textarea(attrs={"rows": 6, "cols": 90}),
    )
    compare = forms.BooleanField(
        required=False,
        initial=True,
        label=gettext_lazy("Compare with the live configuration (run the baseline too)"),
    )

    def __init__(self, *args: Any, clients: QuerySet[Client], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        client_field = self.fields["client"]
        assert isinstance(client_field, forms.ModelChoiceField)
        client_field.queryset = clients
        mode_field = self.fields["mode"]
        assert isinstance(mode_field, forms.ChoiceField)
        mode_field.choices = [(LIVE, _("as live")), *modes.mode_choices()]
        rubric_field = self.fields["rubric"]
        assert isinstance(rubric_field, forms.ChoiceField)
        rubric_field.choices = [
            (LIVE, _("as live")),
            *Rubric.objects.order_by("name").values_list("slug", "name"),
        ]

    def selection(self) -> dict[str, Any]:
        data = self.cleaned_data
        if data["kind"] == RunKind.CASES:
            selection: dict[str, Any] = {}
            if data.get("suite"):
                selection["suite"] = data["suite"]
            tags = [t.strip() for t in (data.get("tags") or "").split(",") if t.strip()]
            if tags:
                selection["tags"] = tags
            ids = [i.strip() for i in (data.get("cases") or "").split(",") if i.strip()]
            if ids:
                selection["cases"] = ids
            return selection
        _label, days, escalated, with_tool = PRESETS[data["preset"]]
        replay: dict[str, Any] = {"limit": data["limit"]}
        if days:
            today = timezone.localdate()
            replay |= {  # up to now
                "since": (today - timedelta(days=days)).isoformat(),
                "escalated_only": escalated,
                "with_tool": with_tool,
            }
        else:
            for key in ("since", "until"):
                if data.get(key):
                    replay[key] = data[key].isoformat()
            replay["escalated_only"] = bool(data.get("escalated_only"))
            replay["with_tool"] = bool(data.get("with_tool"))
        return replay

    def overrides(self) -> dict[str, Any]:
        data = self.cleaned_data
        overrides: dict[str, Any] = {
            key: data[key] for key in ("mode", "rubric", "model") if data.get(key)
        }
        if data.get("evaluation") in ("on", "off"):
            overrides["evaluation"] = data["evaluation"] == "on"
        if data.get("notes") == "none":
            overrides["notes"] = "none"
        elif data.get("notes") == "pending":
            waiting = Note.objects.for_client(data["client"]).filter(
                status=NoteStatus.PENDING_REVIEW
            )
            overrides["notes"] = {
                "approve": list(waiting.order_by("pk").values_list("pk", flat=True)[:200])
            }
        if data.get("business_info") not in (None, "", {}):
            overrides["business_info"] = data["business_info"]
        return overrides


@admin.register(SimulationRun)
class SimulationRunAdmin(TenantScopedAdmin):
    """Runs: listed with status and progress; "add" is the New simulation form and a run's page
    is its report. A run is never edited by hand (the engine writes it)."""

    view_need = READ
    change_need = SUPPORT  # starting a run (the add page); editing is refused below
    list_display = ["__str__", "kind", "status", "progress_bar", "changes", "client", "created_at"]
    list_filter = ["status", "kind", ("client", admin.RelatedOnlyFieldListFilter)]
    change_form_template = "admin/simulations/simulationrun/report.html"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        urls = [
            path(
                "<int:run_id>/stop/",
                self.admin_site.admin_view(self.stop_view),
                name="simulations_simulationrun_stop",
            ),
            path(
                "<int:run_id>/case/<int:case_run_id>/",
                self.admin_site.admin_view(self.case_run_view),
                name="simulations_simulationrun_caserun",
            ),
        ]
        return urls + super().get_urls()

    @admin.display(description=gettext_lazy("progress"))
    def progress_bar(self, obj: SimulationRun) -> SafeString:
        progress = run_progress(obj)
        return format_html(
            '<progress value="{}" max="100" data-run-progress="{}">{} %</progress> {}/{}',
            progress["percent"],
            obj.public_id,
            progress["percent"],
            progress["completed"],
            progress["total"],
        )

    @admin.display(description=gettext_lazy("would pass / would fail"))
    def changes(self, obj: SimulationRun) -> str:
        summary = (obj.report or {}).get("summary")
        if not summary or not obj.compare:
            return "—"
        return f"+{summary.get('fixed', 0)} / −{summary.get('broke', 0)}"

    # ---------------------------------------------------------------- the New simulation form

    def _startable_clients(self, request: HttpRequest) -> QuerySet[Client]:
        allowed = resolver.admin_client_ids(request, SUPPORT)
        clients = Client.objects.order_by("name")
        return clients if allowed is None else clients.filter(pk__in=allowed)

    def _new_run_submit(
        self, request: HttpRequest, form: NewSimulationForm, client: Client
    ) -> RunEstimate | HttpResponse | None:
        """Estimate or start the run the valid `form` describes for `client`: the estimate, the
        redirect to the started run, or None when it is refused (the form then says why)."""
        if not self.role_permits_on(request, SimulationRun(client=client), SUPPORT):
            raise PermissionDenied
        run_settings: dict[str, Any] = {
            "client": client,
            "source": RunSource.ADMIN,
            "kind": form.cleaned_data["kind"],
            "selection": form.selection(),
            "overrides": form.overrides(),
            "compare": form.cleaned_data["compare"],
        }
        try:
            # "Estimate" shows what the run would use against the simulation budget
            # (the same checks as a start; nothing is saved); a start is refused when
            # it does not fit.
            if "_estimate" in request.POST:
                return simulation_run_estimate(**run_settings)
            run = simulation_run_create(
                **run_settings, created_by=request.user, name=form.cleaned_data["name"]
            )
        except ApplicationError as exc:
            fields = (exc.extra or {}).get("fields") or {}
            for where, message in fields.items():
                top = str(where).split(".")[0]
                target = top if top in form.fields else None
                form.add_error(target, f"{where}: {message}")
            if not fields:
                form.add_error(None, exc.message)
            return None
        self.message_user(request, _("The simulation has started."), messages.SUCCESS)
        return HttpResponseRedirect(
            reverse("admin:simulations_simulationrun_change", args=[run.pk])
        )

    def _new_run_form(
        self, request: HttpRequest, clients: QuerySet[Client]
    ) -> tuple[NewSimulationForm, Client | None]:
        """The empty New simulation form, filled in from the query string (a link from a case
        or a suite), and the client it names (or the only client staff may start runs for)."""
        initial: dict[str, Any] = {"compare": True}
        for key in ("client", "cases", "suite", "kind", "preset"):
            if request.GET.get(key):
                initial[key] = request.GET[key]
        if clients.count() == 1 and "client" not in initial:
            initial["client"] = clients.first()
        form = NewSimulationForm(initial=initial, clients=clients)
        picked = initial.get("client")
        if isinstance(picked, Client):
            return form, picked
        if str(picked or "").isdigit():
            return form, clients.filter(pk=int(str(picked))).first()
        return form, None

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        clients = self._startable_clients(request)
        estimate: RunEstimate | None = None
        chosen_client: Client | None = None
        if request.method == "POST":
            form = NewSimulationForm(request.POST, clients=clients)
            if form.is_valid():
                chosen_client = form.cleaned_data["client"]
                submitted = self._new_run_submit(request, form, chosen_client)
                if isinstance(submitted, HttpResponse):
                    return submitted
                estimate = submitted
        else:
            form, chosen_client = self._new_run_form(request, clients)
        chosen = form["cases"].value() or ""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("New simulation"),
            "form": form,
            "estimate": estimate,
            # The chosen client's simulation budget this month, shown before a run starts.
            "budget": (
                estimate.budget
                if estimate is not None
                else simulation_budget_status(client=chosen_client)
                if chosen_client is not None
                else None
            ),
            "held": estimate.held if estimate is not None else None,
            "chosen_cases": [c for c in str(chosen).split(",") if c],
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/simulations/simulationrun/new.html", context)

    # -------------------------------------------------------------------------- the report

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        if run is None or not self.has_view_permission(request, run):
            raise PermissionDenied
        report = run.report or {}
        sides = report.get("sides") or {}
        side_names = [s for s in ("baseline", "candidate") if s in sides]
        case_runs = {
            (cr.case_name, cr.side): cr
            for cr in CaseRun.objects.for_client(run.client)
            .filter(run=run)
            .order_by("case_name", "side", "attempt")
        }
        rows = []
        for case in report.get("cases", []):
            cells = []
            for side in side_names:
                result = case.get(side) or {}
                case_run = case_runs.get((case["name"], side))
                cells.append(
                    {
                        "side": side,
                        "result": result,
                        "url": reverse(
                            "admin:simulations_simulationrun_caserun",
                            args=[run.pk, case_run.pk],
                        )
                        if case_run
                        else "",
                    }
                )
            rows.append({"case": case, "cells": cells})
        table = side_table(side_names, sides)
        side_labels = {"baseline": _("Baseline (live)"), "candidate": _("Candidate")}
        judged = [(side_labels[s], sides[s].get("judged") or {}) for s in side_names]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": run,
            "run": run,
            "title": str(run),
            "progress": run_progress(run),
            "report": report,
            "side_names": side_names,
            "metrics": table,
            "judged": judged,
            "comparisons": comparisons(sides, report.get("ratio") or {}),
            "what_changed": what_changed(report) if len(side_names) == 2 else [],
            "rows": rows,
            "configs": {
                "baseline": pretty_json(run.baseline),
                "candidate": pretty_json(run.candidate),
                "overrides": pretty_json(run.candidate_overrides),
            },
            "can_stop": not run.finished and self.role_permits_on(request, run, SUPPORT),
            "refresh_seconds": 0 if run.finished else 2,
            **(extra_context or {}),
        }
        return TemplateResponse(request, self.change_form_template, context)

    def stop_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        run = self.get_object(request, str(run_id))
        if run is None or not self.role_permits_on(request, run, SUPPORT):
            raise PermissionDenied
        if request.method == "POST":
            simulation_run_stop(client=run.client, run=run)
            self.message_user(request, _("Stop requested."), messages.INFO)
        return HttpResponseRedirect(
            reverse("admin:simulations_simulationrun_change", args=[run.pk])
        )

    def case_run_view(self, request: HttpRequest, run_id: int, case_run_id: int) -> HttpResponse:
        run = self.get_object(request, str(run_id))
        if run is None or not self.has_view_permission(request, run):
            raise PermissionDenied
        case_run = get_object_or_404(
            CaseRun.objects.for_client(run.client), run=run, pk=case_run_id
        )
        attempts = (
            CaseRun.objects.for_client(run.client)
            .filter(run=run, case_name=case_run.case_name, side=case_run.side)
            .order_by("attempt")
        )
        turns = []
        for turn in case_run.transcript or []:
            trace = turn.get("trace")
            turns.append(
                {
                    "turn": turn,
                    "trace_url": reverse("admin:reasoning_reasoningtrace_change", args=[trace])
                    if trace
                    else "",
                    "tools_ran": pretty_json(turn.get("tools_ran")),
                    "tools_proposed": pretty_json(turn.get("tools_proposed")),
                    "tools_refused": pretty_json(turn.get("tools_refused")),
                    "original": pretty_json(turn.get("original")),
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "run": run,
            "case_run": case_run,
            "attempts": attempts,
            "turns": turns,
            "title": _("%(case)s — %(side)s, attempt %(attempt)s")
            % {"case": case_run.case_name, "side": case_run.side, "attempt": case_run.attempt},
            "report_url": reverse("admin:simulations_simulationrun_change", args=[run.pk]),
        }
        return TemplateResponse(request, "admin/simulations/simulationrun/case_run.html", context)
