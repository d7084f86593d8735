"""Simulations: a business sees what the assistant will do before a change reaches a customer.

- A `SimCase` is a test conversation kept as data: the customer's messages (or a simulated
  customer's persona and goal), the tools' stub results, and what code checks against the run
  (`expect`, per turn and for the whole case) plus optional criteria a model judges.
- A `SimulationRun` runs a set of cases — or replays saved conversations — against two
  configurations, the live one (*baseline*) and one with overrides (*candidate*), in a sandbox:
  the real pipeline and guards, nothing sent to a customer, no tool webhook called, nothing
  written to the client's live data.
- A `CaseRun` is one case (or replayed conversation) × one side × one attempt; each of its turns
  is journalled on a `ReasoningTrace` of kind `simulation`, like any turn's.

The JSON shapes (`turns`, `expect`, `tools`, configuration overrides, the report) are documented
in docs/simulations.md and validated by `apps.simulations.schema`."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.model_bases import optional_fk, status_field
from apps.core.models import PublicTenantModel, TenantOwnedModel


class SimCase(PublicTenantModel):
    """A test conversation with expectations (one of the client's suites)."""

    name = models.SlugField(
        _("name"), max_length=100, help_text=_("Unique within the client, e.g. cancel-confirmed.")
    )
    suite = models.SlugField(
        _("suite"), max_length=50, default="default", help_text=_("A group of cases run together.")
    )
    description = models.TextField(_("description"), blank=True)
    tags = models.JSONField(_("tags"), default=list, blank=True)
    # Earlier messages the case starts from: [{"role": "user"|"assistant", "text": "..."}].
    history = models.JSONField(_("history"), default=list, blank=True)
    # The customer's messages, each with its expectations: [{"customer": "...", "expect": {...}}].
    turns = models.JSONField(_("turns"), default=list, blank=True)
    # A simulated customer instead of fixed messages: {"persona", "goal", "max_turns"}.
    simulated = models.JSONField(_("simulated customer"), default=dict, blank=True)
    # Expectations over the whole conversation (e.g. a tool ran exactly once).
    expect = models.JSONField(_("expectations (whole case)"), default=dict, blank=True)
    # Criteria a model judges on the final reply ("states the 60-day return window").
    criteria = models.JSONField(_("judged criteria"), default=list, blank=True)
    # What each tool answers in the sandbox: {"cancel_order": {"ok": true, "result": {...}}}.
    tools = models.JSONField(_("tool stub results"), default=dict, blank=True)
    repeat = models.PositiveSmallIntegerField(
        _("runs per side"), default=1, help_text=_("Run k times; the report gives pass^k.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)

    class Meta:
        verbose_name = _("simulation case")
        verbose_name_plural = _("simulation cases")
        ordering = ["suite", "name"]
        constraints = [
            models.UniqueConstraint(fields=["client", "name"], name="simcase_unique_name"),
        ]
        indexes = [models.Index(fields=["client", "suite"], name="simcase_client_suite")]

    def __str__(self) -> str:
        return f"{self.suite}/{self.name}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    STOPPED = "stopped", _("Stopped")
    FAILED = "failed", _("Failed")


class RunKind(models.TextChoices):
    CASES = "cases", _("Test cases")
    REPLAY = "replay", _("Replay of saved conversations")


class RunSource(models.TextChoices):
    ADMIN = "admin", _("Admin")
    API = "api", _("REST API")
    CLI = "cli", _("manage.py simulate")


class SimulationRun(PublicTenantModel):
    """Cases (or replayed conversations) run against a baseline and a candidate configuration."""

    name = models.CharField(_("name"), max_length=200, blank=True)
    created_by = optional_fk(settings.AUTH_USER_MODEL, _("created by"))
    source = models.CharField(
        max_length=8, choices=RunSource.choices, default=RunSource.ADMIN, verbose_name=_("source")
    )
    kind = models.CharField(
        max_length=8, choices=RunKind.choices, default=RunKind.CASES, verbose_name=_("kind")
    )
    # Which cases: {"suite": "demo", "tags": [...], "cases": [public ids]}; or for a replay
    # {"since", "until", "escalated_only", "with_tool", "flagged_only", "limit"}.
    selection = models.JSONField(default=dict, blank=True, verbose_name=_("selection"))
    # The resolved configurations each side ran with (what decides behaviour; see
    # apps.simulations.config): {"mode", "model", "rubric", "deliberation", "business_info",
    # "notes", "evaluation"}. `candidate_overrides` is what the run changed.
    baseline = models.JSONField(default=dict, blank=True, verbose_name=_("baseline"))
    candidate = models.JSONField(default=dict, blank=True, verbose_name=_("candidate"))
    candidate_overrides = models.JSONField(
        default=dict, blank=True, verbose_name=_("candidate overrides")
    )
    compare = models.BooleanField(
        default=True,
        help_text=_("Run the baseline too (off: the candidate alone)."),
        verbose_name=_("compare"),
    )
    status = status_field(RunStatus.QUEUED, max_length=8)
    stop_requested = models.BooleanField(default=False, verbose_name=_("stop requested"))
    total = models.PositiveIntegerField(default=0, verbose_name=_("total"))  # case runs to do
    completed = models.PositiveIntegerField(
        default=0, verbose_name=_("completed")
    )  # case runs done
    report = models.JSONField(default=dict, blank=True, verbose_name=_("report"))
    # What the run was estimated to use when it started (`simulation_run_estimate`): its
    # tokens are held against the client's simulation budget while it runs.
    estimated_tokens = models.PositiveBigIntegerField(default=0, verbose_name=_("estimated tokens"))
    estimate = models.JSONField(default=dict, blank=True, verbose_name=_("estimate"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    started_at = models.DateTimeField(null=True, blank=True, verbose_name=_("started at"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))

    class Meta:
        verbose_name = _("simulation run")
        verbose_name_plural = _("simulation runs")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["client", "-created_at"], name="simrun_client_recent")]

    def __str__(self) -> str:
        return self.name or f"Simulation {self.public_id}"

    @property
    def finished(self) -> bool:
        return self.status in (RunStatus.DONE, RunStatus.STOPPED, RunStatus.FAILED)


class Side(models.TextChoices):
    BASELINE = "baseline", _("Baseline")
    CANDIDATE = "candidate", _("Candidate")


class CaseStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    PASSED = "passed", _("Passed")
    FAILED = "failed", _("Failed")
    ERROR = "error", _("Error")  # the run could not finish (budget, internal error)
    STOPPED = "stopped", _("Stopped")


class CaseRun(TenantOwnedModel):
    """One case or replayed conversation × one side × one attempt, and what it did."""

    run = models.ForeignKey(
        SimulationRun, on_delete=models.CASCADE, related_name="case_runs", verbose_name=_("run")
    )
    case = optional_fk(SimCase, _("case"))
    # A replay: the saved conversation replayed (read only; never written).
    conversation = optional_fk("conversations.Conversation", _("conversation"))
    case_name = models.CharField(
        max_length=200, verbose_name=_("case name")
    )  # kept if the case is deleted
    side = models.CharField(max_length=10, choices=Side.choices, verbose_name=_("side"))
    attempt = models.PositiveSmallIntegerField(default=1, verbose_name=_("attempt"))
    status = status_field(CaseStatus.QUEUED, max_length=8)
    # Code-checked expectations: True / False; None = nothing to check.
    passed = models.BooleanField(null=True, verbose_name=_("passed"))
    # The model's opinion on the criteria, kept apart: True / False / None (no criteria).
    judged_passed = models.BooleanField(null=True, verbose_name=_("judged passed"))
    # Per turn: {"customer", "replies", "tools": {"ran", "proposed", "refused"}, "escalated",
    # "calls", "tokens", "cost_usd", "latency_ms", "checks": [...], "original": {...}}.
    transcript = models.JSONField(default=list, blank=True, verbose_name=_("transcript"))
    checks = models.JSONField(
        default=list, blank=True, verbose_name=_("checks")
    )  # [{"expect", "turn", "passed", "detail"}]
    judged = models.JSONField(
        default=list, blank=True, verbose_name=_("judged")
    )  # the judge step's results
    llm_calls = models.PositiveIntegerField(default=0, verbose_name=_("llm calls"))
    prompt_tokens = models.PositiveIntegerField(default=0, verbose_name=_("prompt tokens"))
    completion_tokens = models.PositiveIntegerField(default=0, verbose_name=_("completion tokens"))
    cost_usd = models.DecimalField(
        max_digits=14, decimal_places=8, default=0, verbose_name=_("cost usd")
    )
    duration_ms = models.PositiveIntegerField(default=0, verbose_name=_("duration ms"))
    error = models.TextField(blank=True, verbose_name=_("error"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished at"))

    class Meta:
        verbose_name = _("case run")
        verbose_name_plural = _("case runs")
        ordering = ["run", "case_name", "side", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "case_name", "side", "attempt"], name="caserun_unique_attempt"
            ),
        ]
        indexes = [models.Index(fields=["client", "run", "status"], name="caserun_client_run")]

    def __str__(self) -> str:
        return f"{self.case_name} ({self.side} #{self.attempt}: {self.status})"
