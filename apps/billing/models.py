from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.clients.models import Client
from apps.core.model_bases import conversation_fk, optional_fk
from apps.core.models import TenantOwnedModel, TimeStampedModel


class ModelPrice(TimeStampedModel):
    """Provider price of one model, USD per million tokens. Usage cost is computed from it at
    the time of each call and stored on the UsageRecord, so a later price change never rewrites
    history."""

    model = models.CharField(max_length=100, unique=True, verbose_name=_("model"))
    input_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name=_("input per million"),
    )
    output_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name=_("output per million"),
    )
    # What the provider charges for prompt tokens served from its prompt cache; empty = the
    # input price (no discount).
    cached_input_per_million = models.DecimalField(
        _("cached input per million"),
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text=_(
            "USD per million prompt tokens the provider served from its prompt cache (usually "
            "50–90 % below the input price). Empty: cached tokens cost the input price."
        ),
    )
    # The model's context window (prompt + reply), in tokens; empty = LLM_CONTEXT_TOKENS.
    context_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "The model's context window in tokens (prompt + reply). Empty: the "
            "LLM_CONTEXT_TOKENS setting applies."
        ),
        verbose_name=_("context tokens"),
    )

    class Meta:
        verbose_name = _("model price")
        verbose_name_plural = _("model prices")
        ordering = ["model"]

    def __str__(self) -> str:
        return f"{self.model} (${self.input_per_million}/M in, ${self.output_per_million}/M out)"

    @property
    def cached_input_price(self) -> Decimal:
        """USD per million cached prompt tokens (the input price when none is set)."""
        if self.cached_input_per_million is None:
            return Decimal(self.input_per_million)
        return Decimal(self.cached_input_per_million)

    @staticmethod
    def cache_key(model: str) -> str:
        """Where `services.usage.model_price` caches the model's price row."""
        return "billing:model-price:v1:" + hashlib.sha256(model.encode()).hexdigest()[:32]

    def save(self, *args: Any, **kwargs: Any) -> None:
        super().save(*args, **kwargs)
        cache.delete(self.cache_key(self.model))

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        cache.delete(self.cache_key(self.model))
        return super().delete(*args, **kwargs)


class UsagePurpose(models.TextChoices):
    """What an LLM call was made for. Every call is metered (`apps.reasoning.meter`); only a
    customer turn has a conversation and a trace."""

    TURN = "turn", _("Customer turn")
    PLAYGROUND = "playground", _("Playground run")
    SIMULATION = "simulation", _("Simulation")
    INSIGHTS = "insights", _("Insights (batch job)")
    BENCHMARK = "benchmark", _("Benchmark")


class UsageRecord(TenantOwnedModel):
    """One LLM call: who, what for, which turn (if any), which step, the mode that ran, tokens,
    provider cost and billed amount."""

    conversation = optional_fk("conversations.Conversation", _("conversation"))
    trace = optional_fk("reasoning.ReasoningTrace", _("trace"), related_name="usage_records")
    purpose = models.CharField(
        max_length=12,
        choices=UsagePurpose.choices,
        default=UsagePurpose.TURN,
        verbose_name=_("purpose"),
    )
    mode = models.CharField(
        max_length=20, help_text=_("The mode that ran (and is billed)."), verbose_name=_("mode")
    )
    step = models.CharField(max_length=40, verbose_name=_("step"))
    model = models.CharField(max_length=100, verbose_name=_("model"))
    prompt_tokens = models.PositiveIntegerField(default=0, verbose_name=_("prompt tokens"))
    completion_tokens = models.PositiveIntegerField(default=0, verbose_name=_("completion tokens"))
    cached_tokens = models.PositiveIntegerField(
        default=0,
        help_text=_("Of the prompt tokens, those the provider served from its prompt cache."),
        verbose_name=_("cached tokens"),
    )
    tokens_estimated = models.BooleanField(
        default=False,
        help_text=_("The provider reported no usage; tokens were estimated."),
        verbose_name=_("tokens estimated"),
    )
    cost_usd = models.DecimalField(
        max_digits=16, decimal_places=8, default=Decimal("0"), verbose_name=_("cost usd")
    )
    multiplier = models.DecimalField(
        max_digits=6, decimal_places=3, default=Decimal("1"), verbose_name=_("multiplier")
    )
    billed_usd = models.DecimalField(
        max_digits=16, decimal_places=8, default=Decimal("0"), verbose_name=_("billed usd")
    )

    class Meta:
        verbose_name = _("usage record")
        verbose_name_plural = _("usage records")
        indexes = [
            models.Index(fields=["client", "created_at"]),
            models.Index(fields=["client", "mode", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.step} {self.model} {self.prompt_tokens}+{self.completion_tokens}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# ---------------------------------------------------------------------------------------------
# Budgets: a locked counter per client and month, one reservation per admitted turn, alerts.
# ---------------------------------------------------------------------------------------------


class UsageCounter(TenantOwnedModel):
    """What a client has used and holds in reserve this month — the row every budgeted turn
    changes, in one conditional `UPDATE`, before it may call the model, so concurrent turns are
    admitted one at a time against the same numbers (apps/billing/services/budgets.py).

    `*_used` counts finished turns; `*_reserved` the turns in flight (their estimate)."""

    month = models.DateField(help_text=_("First day of the month."), verbose_name=_("month"))
    tokens_used = models.PositiveBigIntegerField(default=0, verbose_name=_("tokens used"))
    turns_used = models.PositiveIntegerField(default=0, verbose_name=_("turns used"))
    tokens_reserved = models.PositiveBigIntegerField(default=0, verbose_name=_("tokens reserved"))
    turns_reserved = models.PositiveIntegerField(default=0, verbose_name=_("turns reserved"))

    class Meta:
        verbose_name = _("usage counter")
        verbose_name_plural = _("usage counters")
        constraints = [
            models.UniqueConstraint(fields=["client", "month"], name="uniq_usage_counter_month")
        ]

    def __str__(self) -> str:
        return f"{self.client_id} {self.month:%Y-%m}: {self.tokens_used} tokens"


class SimulationUsageCounter(TenantOwnedModel):
    """What a client's simulations used this month — their own budget, apart from the live
    `UsageCounter` (a simulation never takes tokens from the customers' budget). Locked
    (`select_for_update`) by each simulation call's check and record."""

    month = models.DateField(help_text=_("First day of the month."), verbose_name=_("month"))
    tokens_used = models.PositiveBigIntegerField(default=0, verbose_name=_("tokens used"))

    class Meta:
        verbose_name = _("simulation usage counter")
        verbose_name_plural = _("simulation usage counters")
        constraints = [
            models.UniqueConstraint(
                fields=["client", "month"], name="uniq_simulation_counter_month"
            )
        ]

    def __str__(self) -> str:
        return f"{self.client_id} {self.month:%Y-%m}: {self.tokens_used} simulation tokens"


class ReservationState(models.TextChoices):
    RESERVED = "reserved", _("Reserved — the turn is running")
    COMMITTED = "committed", _("Committed — actual usage counted")


class TurnHold(TenantOwnedModel):
    """One admitted turn's hold on a budget: reserved when the turn is admitted, committed with
    what it used. A turn holds one on its client's month and one on its visitor's day."""

    state = models.CharField(
        max_length=10,
        choices=ReservationState.choices,
        default=ReservationState.RESERVED,
        verbose_name=_("state"),
    )
    tokens_reserved = models.PositiveIntegerField(default=0, verbose_name=_("tokens reserved"))
    tokens_committed = models.PositiveBigIntegerField(default=0, verbose_name=_("tokens committed"))

    trace_id: int | None  # each hold's own link to the turn's trace

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"turn {self.trace_id}: {self.state}"


class UsageReservation(TurnHold):
    """One admitted turn's hold on its client's monthly budget (reserve, then commit).

    Kept after commit as the turn's budget ledger entry: a turn whose worker died is taken over
    by another worker and finds its reservation here instead of reserving twice."""

    trace = optional_fk(
        "reasoning.ReasoningTrace", _("trace"), related_name="usage_reservation", one_to_one=True
    )
    month = models.DateField(verbose_name=_("month"))
    turn_counted = models.BooleanField(default=False, verbose_name=_("turn counted"))
    committed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("committed at"))

    class Meta:
        verbose_name = _("usage reservation")
        verbose_name_plural = _("usage reservations")
        indexes = [models.Index(fields=["client", "month", "state", "updated_at"])]


class AlertMetric(models.TextChoices):
    TOKENS = "tokens", _("Monthly token budget")
    TURNS = "turns", _("Monthly turn budget")


class UsageAlert(TenantOwnedModel):
    """A usage alert that fired (80 % or 100 % of a monthly budget). The unique key makes each
    threshold fire once per client and month."""

    month = models.DateField(verbose_name=_("month"))
    threshold = models.PositiveSmallIntegerField(
        help_text=_("Percent of the budget."), verbose_name=_("threshold")
    )
    metric = models.CharField(max_length=10, choices=AlertMetric.choices, verbose_name=_("metric"))
    used = models.PositiveBigIntegerField(verbose_name=_("used"))
    budget = models.PositiveBigIntegerField(verbose_name=_("budget"))
    emailed_to = models.EmailField(blank=True, verbose_name=_("emailed to"))
    emailed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("emailed at"))

    class Meta:
        verbose_name = _("usage alert")
        verbose_name_plural = _("usage alerts")
        constraints = [
            models.UniqueConstraint(
                fields=["client", "month", "threshold"], name="uniq_usage_alert_threshold"
            )
        ]

    def __str__(self) -> str:
        return f"{self.threshold}% of {self.get_metric_display()} ({self.month:%Y-%m})"


# ---------------------------------------------------------------------------------------------
# Per-visitor limits: what one visitor (one client address) may spend per day, and each turn's
# hold on it (apps/billing/services/visitors.py). The per-conversation budget and the deliberative
# cap are read from the conversation's own traces: its turns already run one at a time.
# ---------------------------------------------------------------------------------------------


class ConversationVisitor(TenantOwnedModel):
    """The visitor a conversation's latest widget message came from: a keyed hash of the client
    address (`apps.platform.throttling.visitor_key`; IPv6 by /64), never the address itself. The
    turn of that message charges this visitor's daily budget and token window."""

    conversation = conversation_fk(related_name="+", one_to_one=True)
    visitor = models.CharField(max_length=64, verbose_name=_("visitor"))

    class Meta:
        verbose_name = _("conversation visitor")
        verbose_name_plural = _("conversation visitors")

    def __str__(self) -> str:
        return f"{self.conversation_id}: {self.visitor}"


class VisitorUsage(TenantOwnedModel):
    """What one visitor of a client used and holds in reserve on one day — the row every turn of
    that visitor changes, in one conditional `UPDATE`, before it may call the model
    (apps/billing/services/visitors.py)."""

    day = models.DateField(verbose_name=_("day"))
    visitor = models.CharField(max_length=64, verbose_name=_("visitor"))
    tokens_used = models.PositiveBigIntegerField(default=0, verbose_name=_("tokens used"))
    tokens_reserved = models.PositiveBigIntegerField(default=0, verbose_name=_("tokens reserved"))
    turns = models.PositiveIntegerField(default=0, verbose_name=_("turns"))

    class Meta:
        verbose_name = _("visitor usage")
        verbose_name_plural = _("visitor usage")
        constraints = [
            models.UniqueConstraint(
                fields=["client", "day", "visitor"], name="uniq_visitor_usage_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.visitor} {self.day}: {self.tokens_used} tokens"


class TurnAllowance(TurnHold):
    """One admitted turn's hold on its visitor's daily budget (reserve, then commit), and the
    mode the limits let it run in."""

    trace = models.OneToOneField(
        "reasoning.ReasoningTrace",
        on_delete=models.CASCADE,
        related_name="allowance",
        verbose_name=_("trace"),
    )
    visitor_usage = optional_fk(VisitorUsage, _("visitor usage"), related_name="allowances")
    visitor = models.CharField(max_length=64, blank=True, verbose_name=_("visitor"))

    class Meta:
        verbose_name = _("turn allowance")
        verbose_name_plural = _("turn allowances")
        indexes = [models.Index(fields=["client", "state", "updated_at"])]


# ---------------------------------------------------------------------------------------------
# Daily rollups
# ---------------------------------------------------------------------------------------------


class RollupGrain(models.TextChoices):
    """What one DailyUsage row counts. Distinct-turn counts do not add up across finer groups
    (a turn with an assess and a critique call is one turn), so each grouping the reports offer
    has rows of its own; money and calls live in the finest rows only."""

    TURNS = "turns", _("Turns per mode (model and step blank)")
    MODEL = "model", _("Turns per mode and model (step blank)")
    CALLS = "calls", _("Calls, tokens and money per mode, model and step")


class DailyUsage(TenantOwnedModel):
    """Usage of one client on one closed day, aggregated by `billing.rollup_daily_usage`.

    A turn and all its calls count on the day the turn started (its trace's `created_at`)."""

    day = models.DateField(verbose_name=_("day"))
    grain = models.CharField(max_length=8, choices=RollupGrain.choices, verbose_name=_("grain"))
    mode = models.CharField(max_length=20, verbose_name=_("mode"))
    model = models.CharField(max_length=100, blank=True, verbose_name=_("model"))
    step = models.CharField(max_length=40, blank=True, verbose_name=_("step"))
    turns = models.PositiveIntegerField(default=0, verbose_name=_("turns"))
    critique_triggered = models.PositiveIntegerField(
        default=0, verbose_name=_("critique triggered")
    )
    # Turns whose answer the evaluation layer checked, by outcome (ReasoningTrace.
    # evaluation_outcome; see apps/reasoning/evaluation.py).
    evaluation_validated = models.PositiveIntegerField(
        default=0, verbose_name=_("evaluation validated")
    )
    evaluation_questioned = models.PositiveIntegerField(
        default=0, verbose_name=_("evaluation questioned")
    )
    evaluation_improved = models.PositiveIntegerField(
        default=0, verbose_name=_("evaluation improved")
    )
    evaluation_kept = models.PositiveIntegerField(default=0, verbose_name=_("evaluation kept"))
    evaluation_failed = models.PositiveIntegerField(default=0, verbose_name=_("evaluation failed"))
    # "Deliberate when needed" turns that deliberated, by why (ReasoningTrace.
    # deliberation_trigger; apps/reasoning/modes/as_needed.py TRIGGERS).
    deliberated_low_confidence = models.PositiveIntegerField(
        default=0, verbose_name=_("deliberated low confidence")
    )
    deliberated_complaint = models.PositiveIntegerField(
        default=0, verbose_name=_("deliberated complaint")
    )
    deliberated_critique_escalate = models.PositiveIntegerField(
        default=0, verbose_name=_("deliberated critique escalate")
    )
    deliberated_evaluation_questioned = models.PositiveIntegerField(
        default=0, verbose_name=_("deliberated evaluation questioned")
    )
    llm_calls = models.PositiveIntegerField(default=0, verbose_name=_("llm calls"))
    prompt_tokens = models.PositiveBigIntegerField(default=0, verbose_name=_("prompt tokens"))
    completion_tokens = models.PositiveBigIntegerField(
        default=0, verbose_name=_("completion tokens")
    )
    cached_tokens = models.PositiveBigIntegerField(default=0, verbose_name=_("cached tokens"))
    cost_usd = models.DecimalField(
        max_digits=20, decimal_places=8, default=Decimal("0"), verbose_name=_("cost usd")
    )
    billed_usd = models.DecimalField(
        max_digits=20, decimal_places=8, default=Decimal("0"), verbose_name=_("billed usd")
    )

    class Meta:
        verbose_name = _("daily usage")
        verbose_name_plural = _("daily usage")
        constraints = [
            models.UniqueConstraint(
                fields=["client", "day", "grain", "mode", "model", "step"],
                name="uniq_daily_usage_cell",
            )
        ]
        indexes = [models.Index(fields=["day"])]

    def __str__(self) -> str:
        return f"{self.day} {self.grain} {self.mode} {self.model} {self.step}".strip()


class UsageRollupDay(TimeStampedModel):
    """Marks a day whose DailyUsage rows are complete (for every client). Platform data: one
    row per day, locked while the day is re-aggregated so two workers never interleave."""

    day = models.DateField(unique=True, verbose_name=_("day"))
    rolled_up_at = models.DateTimeField(verbose_name=_("rolled up at"))
    rows = models.PositiveIntegerField(default=0, verbose_name=_("rows"))

    class Meta:
        verbose_name = _("usage rollup day")
        verbose_name_plural = _("usage rollup days")
        ordering = ["-day"]

    def __str__(self) -> str:
        return f"{self.day} ({self.rows} rows)"


class ClientUsage(Client):
    """The admin's "usage by client" entry: a client seen through its usage (no table)."""

    class Meta:
        proxy = True
        verbose_name = _("usage by client")
        verbose_name_plural = _("usage by client")
