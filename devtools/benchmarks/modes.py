"""The standard-vs-adaptive cost benchmark behind `manage.py bench_modes`.

It imports a throwaway copy of the demo tenant into a temporary database (created and dropped
with Django's test-database machinery, so the configured database is never written to), starts
the scripted OpenAI-compatible server the test suite uses (`devtools/fake_llm.py`,
which bills prompt tokens from what was actually sent), and plays the seed's traffic mix through
both modes with the real pipeline (`turn_process`, what a worker runs, with the real `openai`
SDK over HTTP):

* 60 % simple questions — answerable from the minimal context (one call);
* 20 % questions that need extra context — adaptive: assess → fetch a policy or the FAQs →
  assess again;
* 20 % risky actions — an action or destructive tool: adaptive: assess → critique → guards (a
  destructive tool asks for confirmation; an action tool runs, then `compose`).

A fourth, informational scenario ("risky, schema first") is a risky action where the model
first fetches the tool's schema, as the adaptive prompt invites it to; it is measured but kept
out of the weighted mix.

The third mode, "deliberate when needed" (`as_needed`), runs the same mix: adaptive first, the
deliberative loop only where adaptive's signals call for it. The scripted model flags one risky
case as a complaint (the tent that arrived with a broken pole), so 1 in 15 turns of the mix
deliberates; its deliberative steps are answered by `bench_deliberative`'s scripted model (a
seeded trajectory of self-scores). Its cost is compared with adaptive's (target ≤ 3×).

Cached prompt tokens are what the scripted server reports (OpenAI's rules: prompts of 1,024
tokens or more, 128-token blocks, matched against the client's recent requests) and are priced
at the model's cached-input price.

With `evaluation=True` (`bench_modes --evaluation`) both plans have the evaluation layer on
(`Plan.evaluation_enabled`, the seed's thresholds): knowledge answers over 100 characters get an
`evaluate` call, scripted to validate them; actions and confirmation requests are not evaluated.

The replies are scripted per scenario and step (realistic texts, the same answer in both
modes); tokens are counted by the fake server from the request and reply bodies (≈ 4 characters
a token), so they measure what GuideDesk sends, not a provider's tokenizer.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import QuerySet, Sum
from django.test.utils import CaptureQueriesContext, override_settings

from apps.billing.models import ModelPrice, UsageRecord
from apps.clients.deliberation import default_deliberation
from apps.clients.identity import Identity
from apps.clients.models import AIMode, Client, Plan
from apps.conversations.models import Role
from apps.conversations.services import (
    conversation_create,
    conversation_customer_verify,
    message_append,
)
from apps.core.tenancy import tenant_scope
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from apps.reasoning.models import ReasoningTrace
from apps.reasoning.services import turn_process
from apps.tools.models import ToolExecution
from devtools.fake_llm import assess_reply

DEMO_TENANT = Path(settings.BASE_DIR) / "demo" / "tenant.json"
MODES = (AIMode.STANDARD, AIMode.ADAPTIVE, AIMode.AS_NEEDED)
MIX = {"simple": Decimal("0.6"), "context": Decimal("0.2"), "risky": Decimal("0.2")}
EXTRA_SCENARIOS = ("risky_schema_first",)
SCENARIO_LABELS = {
    "simple": "simple question (60 %)",
    "context": "needs extra context (20 %)",
    "risky": "risky action (20 %)",
    "risky_schema_first": "risky, schema fetched first (info)",
}


class BenchmarkError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Scenarios: what the customer says and what a good model answers at each step
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    scenario: str
    text: str
    answer: str  # the reply a good model gives (both modes)
    context_key: str | None = None  # adaptive: what the first assess asks to fetch
    tool: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    critique: dict[str, str] = field(default_factory=dict)
    compose: str = ""
    complaint: bool = False  # the model flags it (assess `complaint`): as_needed deliberates

    def tool_fields(self) -> dict[str, Any]:
        """What a good model's assessment (or synthesis) says of the case's tool: fairly
        confident, and a destructive call (its critique asks the user) to be confirmed."""
        destructive = self.critique.get("decision") == "ASK_USER"
        return {
            "confidence": 8,
            "tool_call": self.tool,
            "tool_params": self.params,
            "is_destructive": destructive,
            "needs_confirmation": destructive,
        }


SIMPLE = [
    Case(
        "simple",
        "Hi! What are your opening hours?",
        "Hi! We're open Monday to Friday 8:00–18:00 MT and Saturday 9:00–14:00 MT; we're "
        "closed on Sundays. Is there anything else I can help you with?",
    ),
    Case(
        "simple",
        "What's the best way to reach you by phone?",
        "You can call us at +1 (303) 555-0142 during opening hours (Mon–Fri 8:00–18:00 MT, "
        "Sat 9:00–14:00 MT), or email support@trailhead.example at any time.",
    ),
    Case(
        "simple",
        "What kind of gear do you sell?",
        "We're an independent outdoor-gear shop: tents, backpacks, footwear and technical "
        "apparel for hikers, backpackers and campers. Are you looking for something specific?",
    ),
    Case(
        "simple",
        "Are you open on Sundays?",
        "We're closed on Sundays. You can reach us Monday to Friday 8:00–18:00 MT and on "
        "Saturdays 9:00–14:00 MT — or leave us an email at support@trailhead.example.",
    ),
    Case(
        "simple",
        "Where is Trailhead Outfitters based?",
        "We're based in Boulder, Colorado, and we ship our outdoor gear online. Can I help you "
        "find something?",
    ),
]
CONTEXT = [
    Case(
        "context",
        "How long do I have to return a pair of hiking boots?",
        "You can return boots within 60 days of delivery. They need to be unused — tried on "
        "indoors only, with no dirt or wear on the soles — and have their tags attached. US "
        "returns come with a prepaid label; $7.95 is deducted from the refund unless the item "
        "is defective.",
        context_key="policies.returns",
    ),
    Case(
        "context",
        "Do you price match?",
        "Yes! We match the price of an identical in-stock item from a major US retailer, "
        "before or up to 14 days after your purchase. Marketplace and clearance prices are "
        "excluded.",
        context_key="faqs",
    ),
    Case(
        "context",
        "How much is overnight shipping and when do I need to order?",
        "Overnight shipping costs $29.95 and delivers the next business day if you order by "
        "12:00 MT. Orders placed before noon on a business day usually ship the same day.",
        context_key="policies.shipping",
    ),
    Case(
        "context",
        "When will I get my refund after sending something back?",
        "We issue refunds within 5 business days after your return reaches our warehouse; your "
        "bank may take another 3–10 business days to show the credit.",
        context_key="faqs",
    ),
]
RISKY = [
    Case(
        "risky",
        "Please cancel my order TH-61180, I ordered the wrong size.",
        "I can cancel order TH-61180 for you.",
        tool="cancel_order",
        params={"order_id": "TH-61180", "reason": "ordered the wrong size"},
        critique={
            "decision": "ASK_USER",
            "reasoning": "Destructive action; the customer has not confirmed TH-61180 yet.",
            "message": "Just to confirm: should I cancel order TH-61180? This can't be undone.",
        },
    ),
    Case(
        "risky",
        "Can you change the shipping address of TH-31556 to 455 Pine Street, Golden, CO "
        "80401, USA?",
        "Sure — I'll update the shipping address of TH-31556.",
        tool="update_shipping_address",
        params={"order_id": "TH-31556", "address": "455 Pine Street, Golden, CO 80401, USA"},
        critique={
            "decision": "PROCEED",
            "reasoning": "Explicit request, order id and a complete address given.",
            "message": "",
        },
        compose="Done — order TH-31556 will now ship to 455 Pine Street, Golden, CO 80401, "
        "USA. You'll get the tracking number by email as soon as it ships.",
    ),
    Case(
        "risky",
        "I'd like a refund for order TH-20417, the tent arrived with a broken pole.",
        "I'm sorry about the broken pole! I can submit a refund request for TH-20417.",
        tool="request_refund",
        params={"order_id": "TH-20417", "reason": "tent arrived with a broken pole"},
        critique={
            "decision": "ASK_USER",
            "reasoning": "Destructive action (refund) without the customer's confirmation.",
            "message": "Just to confirm: should I request a full refund for TH-20417?",
        },
        complaint=True,
    ),
]
CASES = {"simple": SIMPLE, "context": CONTEXT, "risky": RISKY, "risky_schema_first": RISKY}
# The question whose first call is compared across modes (docs/benchmarks.md).
FIRST_CALL_CASE = SIMPLE[0]


class ScriptedModel:
    """Answers every step the way a good model would for the current case."""

    def __init__(self) -> None:
        self.case: Case = SIMPLE[0]
        self.scenario = "simple"

    def __call__(self, request: Any) -> dict[str, Any]:
        case = self.case
        # What the model was given: the system message, and the data blocks (fetched FAQs are
        # knowledge, sent as data — never in the system message).
        given = "\n".join(str(m.get("content", "")) for m in request.messages)
        if request.step == "respond":
            return {"response": case.answer, "tool_call": case.tool, "tool_params": case.params}
        if request.step == "assess":
            wanted = case.context_key
            if self.scenario == "risky_schema_first" and case.tool:
                wanted = f"tool_schema:{case.tool}"
            if wanted and f"## {wanted}\n" not in given:
                return _assessment(
                    "Let me check that for you.", confidence=5, needs_more_context=[wanted]
                )
            if case.tool:
                return _assessment(case.answer, **case.tool_fields(), complaint=case.complaint)
            return _assessment(case.answer, confidence=9)
        if request.step == "critique":
            return dict(case.critique)
        if request.step == "compose":
            return {"response": case.compose or case.answer}
        if request.step == "evaluate":
            return {
                "valid": True,
                "improved_response": None,
                "improved_confidence": 0,
                "evaluation": "Every fact in the draft is in the source text.",
            }
        raise BenchmarkError(f"unexpected step {request.step!r}")


def _assessment(response: str, **fields: Any) -> dict[str, Any]:
    return assess_reply(response, **({"complaint": False} | fields))


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class Tally:
    turns: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, served from the provider's prompt cache
    cost_usd: Decimal = Decimal(0)
    billed_usd: Decimal = Decimal(0)
    queries: int = 0
    evaluated: int = 0  # turns whose answer the evaluation step checked
    deliberated: int = 0  # as_needed turns that ran the deliberative loop
    orchestration_ms: float = 0.0
    cpu_ms: float = 0.0
    unexpected: list[str] = field(default_factory=list)

    def per_turn(self, value: float | Decimal) -> Decimal:
        return Decimal(value) / self.turns if self.turns else Decimal(0)


class ScenarioTallies:
    """A result's tallies per (mode, scenario), and their per-turn figures over the mix."""

    tallies: dict[tuple[str, str], Tally]

    def tally(self, mode: str, scenario: str) -> Tally:
        return self.tallies.setdefault((mode, scenario), Tally())

    def weighted(self, mode: str, attribute: str) -> Decimal:
        """Per-turn value over the seed's mix (60/20/20), from each scenario's mean."""
        total = Decimal(0)
        for scenario, weight in MIX.items():
            tally = self.tally(mode, scenario)
            total += weight * tally.per_turn(getattr(tally, attribute))
        return total


@dataclass
class BenchResult(ScenarioTallies):
    model: str
    price: ModelPrice
    turns_per_mode: int
    evaluation: bool = False
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    # The usage report's provider cost (every mode's client) and what the scripted provider
    # would invoice for the same requests, cached tokens priced at the cached rate.
    reported_usd: Decimal = Decimal(0)
    provider_usd: Decimal = Decimal(0)
    # Prompt tokens of each mode's first call on `FIRST_CALL_CASE`, its last turn of the run
    # (so with the notes the run has written by then): adaptive's `assess`, standard's
    # `respond`.
    first_call: dict[str, int] = field(default_factory=dict)

    def first_call_ratio(self) -> Decimal | None:
        """Adaptive's first call ÷ standard's prompt, on `FIRST_CALL_CASE`."""
        ada, std = self.first_call.get("adaptive"), self.first_call.get("standard")
        return Decimal(ada) / Decimal(std) if ada and std else None

    def uncached_cost(self, mode: str) -> Decimal:
        """Weighted provider cost per turn as if nothing were served from a prompt cache:
        every prompt token at the input price."""
        prompt, completion = (
            self.weighted(mode, "prompt_tokens"),
            self.weighted(mode, "completion_tokens"),
        )
        return (
            prompt * self.price.input_per_million + completion * self.price.output_per_million
        ) / Decimal(1_000_000)

    def uncached_ratio(self) -> Decimal | None:
        """Adaptive ÷ standard weighted cost per turn without prompt caching."""
        std = self.uncached_cost("standard")
        return self.uncached_cost("adaptive") / std if std else None

    def evaluated(self, mode: str) -> tuple[int, int]:
        """(evaluated turns, turns) of the weighted mix's scenarios in `mode`."""
        tallies = [self.tally(mode, scenario) for scenario in MIX]
        return sum(t.evaluated for t in tallies), sum(t.turns for t in tallies)

    def cached_share(self, mode: str, scenario: str | None = None) -> Decimal:
        """Cached ÷ prompt tokens (a scenario's, or the weighted mix's)."""
        if scenario is None:
            prompt = self.weighted(mode, "prompt_tokens")
            cached = self.weighted(mode, "cached_tokens")
        else:
            tally = self.tally(mode, scenario)
            prompt, cached = Decimal(tally.prompt_tokens), Decimal(tally.cached_tokens)
        return cached / prompt if prompt else Decimal(0)

    def versus_adaptive(self, mode: str, scenario: str | None = None) -> Decimal | None:
        """`mode`'s provider cost per turn ÷ adaptive's (a scenario's, or the weighted mix's)."""
        if scenario is None:
            base, cost = self.weighted("adaptive", "cost_usd"), self.weighted(mode, "cost_usd")
        else:
            ada, other = self.tally("adaptive", scenario), self.tally(mode, scenario)
            base, cost = ada.per_turn(ada.cost_usd), other.per_turn(other.cost_usd)
        return cost / base if base else None

    def deliberated(self, mode: str = AIMode.AS_NEEDED) -> tuple[int, int]:
        """(turns that deliberated, turns) of the weighted mix's scenarios in `mode`."""
        tallies = [self.tally(mode, scenario) for scenario in MIX]
        return sum(t.deliberated for t in tallies), sum(t.turns for t in tallies)

    def ratio(self, scenario: str | None = None) -> Decimal | None:
        """Adaptive ÷ standard provider cost per turn (for a scenario or the weighted mix)."""
        if scenario is None:
            std, ada = self.weighted("standard", "cost_usd"), self.weighted("adaptive", "cost_usd")
        else:
            std = self.tally("standard", scenario).per_turn(
                self.tally("standard", scenario).cost_usd
            )
            ada = self.tally("adaptive", scenario).per_turn(
                self.tally("adaptive", scenario).cost_usd
            )
        return (ada / std) if std else None


# ---------------------------------------------------------------------------------------------
# Running it
# ---------------------------------------------------------------------------------------------


def shuffled_plan(counts: dict[str, int], seed: int) -> list[tuple[str, Case]]:
    """Each scenario's cases, taken in turn until its count is reached, all in an order
    shuffled by `seed`: (scenario, case) per turn."""
    rng = random.Random(seed)  # noqa: S311 - shuffling a benchmark, not security
    plan: list[tuple[str, Case]] = []
    for scenario, count in counts.items():
        cases = CASES[scenario]
        plan.extend((scenario, cases[i % len(cases)]) for i in range(count))
    rng.shuffle(plan)
    return plan


def scenario_counts(turns: int) -> dict[str, int]:
    simple = round(turns * 0.6)
    context = round(turns * 0.2)
    counts = {"simple": simple, "context": context, "risky": max(0, turns - simple - context)}
    counts["risky_schema_first"] = max(1, counts["risky"])
    return counts


@contextmanager
def temporary_database() -> Iterator[None]:
    """Switch the default connection to a fresh, migrated database for the duration — Django's
    own test-database machinery: in memory for SQLite, `test_<name>` for PostgreSQL — and drop
    it afterwards. The configured database is never written to."""
    old_name = connection.creation.create_test_db(
        verbosity=0, autoclobber=True, serialize=False, keepdb=False
    )
    try:
        yield
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)


@contextmanager
def bench_llm(base_url: str, model: str) -> Iterator[None]:
    """Turns talk to the bench's fake server at ``base_url`` as ``model``, in this process
    (nothing may be handed to a broker), without the HTTP client's per-request lines."""
    overrides = {
        "OPENAI_API_KEY": "bench-key",
        "OPENAI_BASE_URL": base_url,
        "LLM_MODEL": model,
        "LLM_RESPONSE_FORMAT": "json_schema",
        "CELERY_TASK_ALWAYS_EAGER": True,
    }
    with (
        override_settings(**overrides),
        quiet("httpx", "httpx2", "openai", "guidedesk.reasoning"),
    ):
        yield


@contextmanager
def quiet(*names: str) -> Iterator[None]:
    """No per-request INFO lines from the HTTP client while hundreds of turns run."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def current_prices() -> list[dict[str, Any]]:
    """The configured database's model prices (the benchmark prices calls as production
    would); empty when it has none or is not migrated."""
    try:
        return [
            {
                "model": p.model,
                "input_per_million": str(p.input_per_million),
                "output_per_million": str(p.output_per_million),
                "cached_input_per_million": None
                if p.cached_input_per_million is None
                else str(p.cached_input_per_million),
            }
            for p in ModelPrice.objects.all()
        ]
    except DatabaseError:
        return []


def bench_clients(
    token: str, prices: list[dict[str, Any]], evaluation: bool = False
) -> dict[str, Client]:
    """Two copies of the demo tenant, one per mode, on copies of its plan."""
    data = load_tenant_file(DEMO_TENANT)  # with the demo's article directory read in
    demo = data["clients"][0]
    base_plan = next(p for p in data["plans"] if p["slug"] == demo["plan"])
    known = {p["model"] for p in prices} | set(ModelPrice.objects.values_list("model", flat=True))
    plans, clients = [], []
    for mode in MODES:
        slug = f"bench-{token}-{mode}"
        plans.append({**base_plan, "slug": slug, "name": f"Bench {mode}", "ai_mode": mode})
        clients.append({**demo, "slug": slug, "plan": slug, "name": demo["name"]})
    tenant_import(
        data={
            # Keep the database's own prices: the benchmark prices calls as production would.
            "model_prices": prices + [p for p in data["model_prices"] if p["model"] not in known],
            "plans": plans,
            "clients": clients,
        }
    )
    slugs = [f"bench-{token}-{mode}" for mode in MODES]
    Plan.objects.filter(slug__in=slugs).update(evaluation_enabled=evaluation)
    return {
        mode: Client.objects.select_related("plan").get(slug=f"bench-{token}-{mode}")
        for mode in MODES
    }


def remove_bench_clients(clients: dict[str, Client]) -> None:
    """Delete the tenants and plans `bench_clients` made (a run in the current database)."""
    plans = [c.plan_id for c in clients.values()]
    for bench_client in clients.values():
        # Tool runs protect their tool (the audit trail): they go first, as in `demo_reset`.
        ToolExecution.objects.for_client(bench_client).delete()
    Client.objects.filter(pk__in=[c.pk for c in clients.values()]).delete()
    Plan.objects.filter(pk__in=plans).delete()


def _expected_steps(
    mode: str, scenario: str, case: Case, evaluation: bool = False, min_chars: int = 100
) -> list[str]:
    # Evaluated: knowledge answers (no tool) over the plan's length threshold; the scripted
    # confidences (adaptive 9/10, standard's 70 %) are above the 30 % threshold.
    evaluate = ["evaluate"] if evaluation and not case.tool and len(case.answer) > min_chars else []
    if mode == AIMode.STANDARD:
        return ["respond"] + (["compose"] if case.compose else []) + evaluate
    # as_needed: adaptive's steps when it does not deliberate (a deliberating turn is checked
    # by its trigger instead, `_one_turn`).
    steps = ["assess"]
    if scenario == "context" or scenario == "risky_schema_first":
        steps.append("assess")
    if case.tool:
        steps.append("critique")
    if case.compose:
        steps.append("compose")
    return steps + evaluate


def run_benchmark(
    *,
    turns: int,
    model: str,
    progress: Callable[[int], Any] | None = None,
    seed: int = 7,
    in_current_database: bool = False,
    evaluation: bool = False,
) -> BenchResult:
    """Run the mix `turns` times per mode (plus the informational scenario) and tally it.

    By default everything happens in a temporary database that is dropped at the end.
    `in_current_database=True` (for the test suite, whose own transaction undoes it) works in
    the current database and deletes the two benchmark clients afterwards."""
    from devtools.fake_llm import FakeLLMServer

    plan = shuffled_plan(scenario_counts(turns), seed)

    # bench_deliberative's scripted model answers adaptive's steps with `ScriptedModel` and the
    # deliberative loop's like a plausible model (imported here: it imports this module).
    from devtools.benchmarks.deliberative import ScriptedDeliberation

    scripted = ScriptedDeliberation(seed)
    prices = current_prices()
    database = nullcontext() if in_current_database else temporary_database()
    with FakeLLMServer() as server, database:
        server.fallback(scripted)
        clients = bench_clients(token=f"{int(time.time())}", prices=prices, evaluation=evaluation)
        # A deliberating turn runs the demo plan's loop: 2–4 steps, one refinement round.
        Plan.objects.filter(pk=clients[AIMode.AS_NEEDED].plan_id).update(
            deliberation={
                **default_deliberation(),
                "min_steps": 2,
                "max_steps": 4,
                "refinement_iterations": 1,
            }
        )
        try:
            price = ModelPrice.objects.filter(model=model).first()
            if price is None:
                raise BenchmarkError(
                    f"No ModelPrice for {model!r}: add one in the admin (Billing → model prices)."
                )
            result = BenchResult(
                model=model, price=price, turns_per_mode=turns, evaluation=evaluation
            )
            with bench_llm(server.base_url, model):
                for mode in MODES:
                    client = clients[mode]
                    for scenario, case in plan:
                        scripted.new_turn(case, scenario)
                        _one_turn(
                            result.tally(mode, scenario),
                            client,
                            mode,
                            scenario,
                            case,
                            result.first_call,
                        )
                        if progress is not None:
                            progress(1)
            result.reported_usd, result.provider_usd = _invoices(server, clients)
        finally:
            if in_current_database:
                remove_bench_clients(clients)
    return result


def _invoices(server: Any, clients: dict[str, Client]) -> tuple[Decimal, Decimal]:
    """(the usage reports' provider cost of the run, the scripted provider's own invoice)."""
    from apps.billing import periods
    from apps.billing.selectors import usage_report

    today = periods.today()
    reported = sum(
        (
            usage_report(
                client=c, start=today - timedelta(days=1), end=today, group_by="mode"
            ).totals.cost_usd
            for c in clients.values()
        ),
        Decimal(0),
    )
    prices = {
        p.model: (p.input_per_million, p.cached_input_price, p.output_per_million)
        for p in ModelPrice.objects.all()
    }
    return reported, server.provider_cost(prices)


def _one_turn(
    tally: Tally,
    client: Client,
    mode: str,
    scenario: str,
    case: Case,
    first_call: dict[str, int] | None = None,
) -> None:
    turn = measure_turn(client, case.text)
    steps = list(turn.records.order_by("pk").values_list("step", flat=True))
    plan = client.plan
    expected = _expected_steps(
        mode, scenario, case, plan.evaluation_enabled, plan.evaluation_min_chars
    )
    trigger = turn.trace.deliberation_trigger
    if mode == AIMode.AS_NEEDED and case.complaint:
        # Deliberated on the model's complaint flag: assess, then the loop and its synthesis.
        if trigger != "complaint" or "synthesize" not in steps or turn.trace.escalated:
            tally.unexpected.append(f"{mode}/{scenario}: {case.text!r} ran {steps} ({trigger})")
    elif steps != expected or turn.trace.escalated or trigger:
        tally.unexpected.append(f"{mode}/{scenario}: {case.text!r} ran {steps}, wanted {expected}")
    tally.evaluated += bool(turn.trace.evaluation_outcome)
    tally.deliberated += bool(trigger)
    turn.count_into(tally)
    if case is FIRST_CALL_CASE and first_call is not None:
        record = turn.records.order_by("pk").first()
        first_call[mode] = record.prompt_tokens if record else 0


@dataclass
class MeasuredTurn:
    """One turn as a worker runs it, with what the benchmarks count of it."""

    trace: ReasoningTrace
    records: QuerySet[UsageRecord]
    queries: int
    wall_ms: float
    cpu_ms: float

    def count_into(self, tally: Tally) -> None:
        money = self.records.aggregate(
            cost=Sum("cost_usd"), billed=Sum("billed_usd"), cached=Sum("cached_tokens")
        )
        tally.turns += 1
        tally.llm_calls += self.trace.llm_calls
        tally.prompt_tokens += self.trace.prompt_tokens
        tally.completion_tokens += self.trace.completion_tokens
        tally.cached_tokens += money["cached"] or 0
        tally.cost_usd += money["cost"] or Decimal(0)
        tally.billed_usd += money["billed"] or Decimal(0)
        tally.queries += self.queries
        tally.orchestration_ms += max(0.0, self.wall_ms - self.trace.llm_wait_ms)
        tally.cpu_ms += self.cpu_ms


def measure_turn(client: Client, text: str) -> MeasuredTurn:
    """Store a customer message (as the widget does, without enqueueing) and run its turn the
    way a worker does, measuring the turn only (`bench_modes`, `bench_deliberative`)."""
    conversation, _ = conversation_create(client=client)
    # A signed-in customer, as on the demo shop: the mix's cancels and refunds are
    # customer-scoped tools, which an anonymous visitor is only told to sign in for.
    conversation_customer_verify(
        client=client,
        conversation=conversation,
        identity=Identity(customer_id="bench-customer", email="", name="", via="jwt"),
    )
    message = message_append(client=client, conversation=conversation, role=Role.USER, text=text)
    # CaptureQueriesContext slices a log capped at 9,000 queries: start each turn empty.
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as queries:
        started, cpu_started = time.perf_counter(), time.thread_time()
        with tenant_scope(client.pk):
            turn_process(message_id=message.pk)
        wall_ms = (time.perf_counter() - started) * 1000
        # CPU of this thread only: the pipeline's own work (and the SDK's), not the fake
        # server's threads and not the wait for the model — steady on a busy machine.
        cpu_ms = (time.thread_time() - cpu_started) * 1000
    trace = ReasoningTrace.objects.get(user_message=message)
    return MeasuredTurn(
        trace=trace,
        records=UsageRecord.objects.filter(trace=trace),
        # Savepoints only exist because the benchmark runs inside one rolled-back transaction.
        queries=sum(1 for q in queries.captured_queries if "SAVEPOINT" not in q["sql"].upper()),
        wall_ms=wall_ms,
        cpu_ms=cpu_ms,
    )


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------

# The per-turn figures of a table row, in its columns' order.
PER_TURN = (
    "llm_calls",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "cost_usd",
    "billed_usd",
    "queries",
    "orchestration_ms",
    "cpu_ms",
)
HEADERS = (
    "scenario",
    "mode",
    "LLM calls/turn",
    "prompt tok/turn",
    "cached share",
    "completion tok/turn",
    "cost/turn (USD)",
    "billed/turn (USD)",
    "adaptive ÷ standard cost",
    "× adaptive cost",
    "SQL/turn",
    "orchestration ms/turn",
    "pipeline CPU ms/turn",
)


def table_rows(result: BenchResult) -> list[list[str]]:
    rows: list[list[str]] = []
    for scenario in [*MIX, *EXTRA_SCENARIOS, None]:
        for mode in MODES:
            if scenario is None:
                label = "weighted mix (60/20/20)"
                values = {name: result.weighted(mode, name) for name in PER_TURN}
            else:
                label = SCENARIO_LABELS[scenario]
                tally = result.tally(mode, scenario)
                values = {name: tally.per_turn(getattr(tally, name)) for name in PER_TURN}
            ratio = result.ratio(scenario) if mode == AIMode.ADAPTIVE else None
            versus = result.versus_adaptive(mode, scenario) if mode == AIMode.AS_NEEDED else None
            rows.append(
                [
                    label,
                    mode,
                    f"{values['llm_calls']:.2f}",
                    f"{values['prompt_tokens']:,.0f}",
                    f"{result.cached_share(mode, scenario):.0%}",
                    f"{values['completion_tokens']:,.0f}",
                    f"{values['cost_usd']:.7f}",
                    f"{values['billed_usd']:.7f}",
                    f"{ratio:.2f}" if ratio is not None else "",
                    f"{versus:.2f}" if versus is not None else "",
                    f"{values['queries']:.1f}",
                    f"{values['orchestration_ms']:.1f}",
                    f"{values['cpu_ms']:.1f}",
                ]
            )
    return rows


def markdown_table(result: BenchResult) -> str:
    lines = [
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(HEADERS))) + "|",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in table_rows(result))
    return "\n".join(lines)


def text_table(result: BenchResult) -> str:
    rows = [list(HEADERS), *table_rows(result)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]
    out = []
    for index, row in enumerate(rows):
        cells = [
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
