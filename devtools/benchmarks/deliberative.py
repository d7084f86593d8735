"""The deliberative-vs-adaptive benchmark behind `manage.py bench_deliberative`.

Same machinery as `bench_modes` (devtools/benchmarks/modes.py): a throwaway copy of the demo
tenant in a temporary database, the test suite's scripted OpenAI-compatible server (tokens
counted from what is actually sent), the real pipeline (`turn_process` with the real `openai`
SDK), the seed's traffic mix (60 % simple questions, 20 % needing extra context, 20 % risky
actions).

Adaptive runs as in `bench_modes`. For deliberative mode a scripted model answers every step the
way a plausible model would: per turn a seeded random trajectory of self-scores (a start of
0.40–0.70 rising 0–0.08 a step, so some turns reach the 0.75 target after MIN and some run
to MAX), feedback of 2–3 sentences, the same final answer as adaptive for `synthesize`, and
refinement critiques scoring 60–95 (so some refinements stop early). The result: calls, tokens,
cost, SQL queries and orchestration time per turn for both modes, and the distribution of
termination reasons and of steps per turn.

The scripted server emulates the provider's prompt caching (`fake_llm.PromptCache`), and the
model is priced with its cached-input rate (`CACHED_PRICES` when the database has none), so the
cost columns are what the provider would invoice; the cached share is reported per mode and per
step, and the usage records' total is checked against the server's own invoice."""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from apps.billing.models import ModelPrice
from apps.clients.models import AIMode, Client, Plan
from apps.clients.rubrics import SUPPORT
from devtools.benchmarks.modes import (
    MIX,
    SCENARIO_LABELS,
    BenchmarkError,
    Case,
    ScenarioTallies,
    ScriptedModel,
    Tally,
    bench_clients,
    bench_llm,
    current_prices,
    measure_turn,
    remove_bench_clients,
    scenario_counts,
    shuffled_plan,
    temporary_database,
)
from devtools.fake_llm import assess_reply

MODES = (AIMode.ADAPTIVE, AIMode.DELIBERATIVE)
# Public list prices, USD per million tokens (input, cached input, output): the bench prices a
# model with its cached rate when the database's price has none.
CACHED_PRICES: dict[str, tuple[str, str, str]] = {
    "gpt-4o-mini": ("0.15", "0.075", "0.60"),
    "gpt-4.1-mini": ("0.40", "0.10", "1.60"),
}
KEYS = [p["key"] for p in SUPPORT["principles"]]
_STEP = re.compile(r"Take reasoning step (\d+) of")


class ScriptedDeliberation:
    """Answers adaptive's steps like `modes.ScriptedModel` and deliberative's like a plausible
    model following the loop, with a seeded trajectory per turn."""

    def __init__(self, seed: int) -> None:
        self.adaptive = ScriptedModel()
        self.rng = random.Random(seed)  # noqa: S311 - a benchmark's dice, not security
        self.start = 0.6
        self.rise = 0.05
        self.critique_scores: list[int] = []

    def new_turn(self, case: Case, scenario: str) -> None:
        self.adaptive.case, self.adaptive.scenario = case, scenario
        self.start = self.rng.uniform(0.40, 0.70)
        self.rise = self.rng.uniform(0.0, 0.08)
        self.critique_scores = [self.rng.randint(60, 95) for _ in range(5)]

    def __call__(self, request: Any) -> dict[str, Any]:
        case = self.adaptive.case
        if request.step == "reason_step":
            last = request.messages[-1].get("content", "")
            found = _STEP.search(last if isinstance(last, str) else "")
            n = int(found.group(1)) if found else 1
            mean = min(0.97, self.start + self.rise * (n - 1))
            scores = {
                key: round(max(0.0, min(1.0, mean + self.rng.uniform(-0.05, 0.05))), 2)
                for key in KEYS
            }
            return {
                "content": f"Step {n}: weighing what the customer asked ({case.text[:60]}) "
                "against the business information and policies, and what a complete, "
                "caring answer must include; checking what is unknown and must not be "
                "promised.",
                "status": "continue",
                "scores": scores,
                "rationale": "Grounded in the policy text; the next step is clearer now, tone "
                "can be warmer.",
                "hypotheses": [
                    {"intent": case.text[:60], "confidence": 0.8},
                    {"intent": "something else", "confidence": 0.2},
                ]
                if n == 1
                else [],
            }
        if request.step == "feedback":
            return {
                "feedback": "The mean is rising toward the target. caring_tone is the weakest "
                "principle: acknowledge the customer's situation before the facts. Keep every "
                "claim tied to the business information."
            }
        if request.step == "synthesize":
            if not case.tool:
                return assess_reply(case.answer)
            return assess_reply(case.answer, **case.tool_fields())
        if request.step == "refine_critique":
            score = self.critique_scores.pop(0) if self.critique_scores else 90
            first = re.split(r"(?<=[.!?])\s+", case.answer)[0]
            return {
                "score": score,
                "issues": []
                if score >= 90
                else [
                    {"quote": first, "problem": "Could name the next step.", "kind": "missing_info"}
                ],
                "critique": "Accurate and within policy; the next step could be clearer.",
            }
        if request.step == "improve":
            return {"response": f"{case.answer} If anything is unclear, just reply here."}
        return self.adaptive(request)


@dataclass
class DeliberativeResult(ScenarioTallies):
    model: str
    price: ModelPrice
    turns_per_mode: int
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    terminations: Counter[str] = field(default_factory=Counter)
    steps: Counter[int] = field(default_factory=Counter)
    refinement_calls: Counter[int] = field(default_factory=Counter)
    # (mode, scenario) -> cached prompt tokens; (mode, step) -> [calls, prompt, cached tokens].
    cached: Counter[tuple[str, str]] = field(default_factory=Counter)
    per_step: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    # mode -> (the usage records' cost, the scripted provider's own invoice), USD.
    invoices: dict[str, tuple[Decimal, Decimal]] = field(default_factory=dict)

    def cached_share(self, mode: str) -> Decimal:
        """The weighted mix's cached share of prompt tokens."""
        prompt = cached = Decimal(0)
        for scenario, weight in MIX.items():
            tally = self.tally(mode, scenario)
            prompt += weight * tally.per_turn(tally.prompt_tokens)
            cached += weight * tally.per_turn(self.cached[(mode, scenario)])
        return cached / prompt if prompt else Decimal(0)


def run_deliberative_benchmark(
    *,
    turns: int,
    model: str,
    progress: Callable[[int], Any] | None = None,
    seed: int = 7,
    in_current_database: bool = False,
) -> DeliberativeResult:
    from devtools.fake_llm import FakeLLMServer

    counts = {s: n for s, n in scenario_counts(turns).items() if s in MIX}
    plan = shuffled_plan(counts, seed)

    prices = current_prices()
    restore: Callable[[], Any] | None = None
    database = nullcontext() if in_current_database else temporary_database()
    with FakeLLMServer() as server, database:
        clients = bench_clients(token=f"{int(time.time())}", prices=prices)
        # bench_clients makes standard + adaptive copies; turn the standard one deliberative.
        deliberative = clients[AIMode.STANDARD]
        Plan.objects.filter(pk=deliberative.plan_id).update(ai_mode=AIMode.DELIBERATIVE)
        deliberative.plan.refresh_from_db()
        by_mode = {AIMode.ADAPTIVE: clients[AIMode.ADAPTIVE], AIMode.DELIBERATIVE: deliberative}
        try:
            price, restore = _priced(model, restore=in_current_database)
            result = DeliberativeResult(model=model, price=price, turns_per_mode=turns)
            with bench_llm(server.base_url, model):
                for mode in MODES:
                    scripted = ScriptedDeliberation(seed)
                    server.fallback(scripted)
                    server.usage_log.clear()
                    recorded = Decimal(0)
                    for scenario, case in plan:
                        scripted.new_turn(case, scenario)
                        recorded += _one_turn(result, by_mode[mode], mode, scenario, case)
                        if progress is not None:
                            progress(1)
                    rates = (price.input_per_million, price.cached_input_price)
                    invoice = server.provider_cost({model: (*rates, price.output_per_million)})
                    result.invoices[mode] = (recorded, invoice)
        finally:
            if restore is not None:
                restore()
            if in_current_database:
                remove_bench_clients(clients)
    return result


def _priced(model: str, *, restore: bool) -> tuple[ModelPrice, Callable[[], Any] | None]:
    """The model's price, with its cached-input rate from `CACHED_PRICES` when it has none
    (a model missing from the database but listed there is added). With `restore`, the
    returned callable puts the database back as it was."""
    listed = CACHED_PRICES.get(model)
    price = ModelPrice.objects.filter(model=model).first()
    if price is None and listed is None:
        raise BenchmarkError(f"No ModelPrice for {model!r}.")
    undo: Callable[[], Any] | None = None
    if price is None:
        assert listed is not None
        price = ModelPrice.objects.create(
            model=model,
            input_per_million=Decimal(listed[0]),
            cached_input_per_million=Decimal(listed[1]),
            output_per_million=Decimal(listed[2]),
        )
        created = price.pk
        undo = lambda: ModelPrice.objects.filter(pk=created).delete()  # noqa: E731
    elif price.cached_input_per_million is None and listed is not None:
        price.cached_input_per_million = Decimal(listed[1])
        price.save(update_fields=["cached_input_per_million"])
        pk = price.pk
        undo = lambda: ModelPrice.objects.filter(pk=pk).update(  # noqa: E731
            cached_input_per_million=None
        )
    return price, undo if restore else None


def _one_turn(
    result: DeliberativeResult, client: Client, mode: str, scenario: str, case: Case
) -> Decimal:
    """Run and count one turn; returns the cost its usage records say."""
    tally = result.tally(mode, scenario)
    turn = measure_turn(client, case.text)
    trace = turn.trace
    if trace.escalated or trace.mode != mode:
        tally.unexpected.append(f"{mode}/{scenario}: {case.text!r} escalated or ran {trace.mode}")
    if mode == AIMode.DELIBERATIVE:
        end = trace.steps.filter(name="deliberation_end").values_list("output", flat=True).first()
        if end:
            result.terminations[end["termination"]] += 1
            result.steps[end["steps"]] += 1
        result.refinement_calls[
            turn.records.filter(step__in=["refine_critique", "improve"]).count()
        ] += 1
    turn.count_into(tally)
    for row in turn.records.values("step", "prompt_tokens", "cached_tokens", "cost_usd"):
        result.cached[(mode, scenario)] += row["cached_tokens"]
        calls = result.per_step.setdefault((mode, row["step"]), [0, 0, 0])
        calls[0] += 1
        calls[1] += row["prompt_tokens"]
        calls[2] += row["cached_tokens"]
    return sum((r.cost_usd for r in turn.records), Decimal(0))


COLUMNS = (
    ("llm_calls", "LLM calls/turn", "{:.2f}"),
    ("prompt_tokens", "prompt tok/turn", "{:,.0f}"),
    ("completion_tokens", "completion tok/turn", "{:,.0f}"),
    ("cost_usd", "cost/turn (USD)", "{:.6f}"),
    ("billed_usd", "billed/turn (USD)", "{:.6f}"),
    ("queries", "SQL/turn", "{:.1f}"),
    ("orchestration_ms", "orchestration ms/turn", "{:.1f}"),
    ("cpu_ms", "pipeline CPU ms/turn", "{:.1f}"),
)


def markdown_tables(result: DeliberativeResult) -> str:
    head = [
        "scenario",
        "mode",
        *(label for _, label, _ in COLUMNS),
        "cached share",
        "× adaptive cost",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for scenario in [*MIX, None]:
        base: Decimal | None = None
        for mode in MODES:
            if scenario is None:
                label = "weighted mix (60/20/20)"
                values = {name: result.weighted(mode, name) for name, _, _ in COLUMNS}
                share = result.cached_share(mode)
            else:
                label = SCENARIO_LABELS[scenario]
                tally = result.tally(mode, scenario)
                values = {name: tally.per_turn(getattr(tally, name)) for name, _, _ in COLUMNS}
                cached = result.cached[(mode, scenario)]
                share = Decimal(cached) / tally.prompt_tokens if tally.prompt_tokens else Decimal(0)
            cost = values["cost_usd"]
            if mode == AIMode.ADAPTIVE:
                base = cost
            ratio = f"{cost / base:.1f}" if base and mode == AIMode.DELIBERATIVE else ""
            cells = [fmt.format(values[name]) for name, _, fmt in COLUMNS]
            lines.append("| " + " | ".join([label, mode, *cells, f"{share:.0%}", ratio]) + " |")
    total = sum(result.terminations.values()) or 1
    lines += [
        "",
        "| mode | step | calls | prompt tok/call | cached share |",
        "|---|---|---:|---:|---:|",
        *(
            f"| {mode} | `{step}` | {calls} | {prompt / calls:,.0f} | "
            f"{(cached / prompt if prompt else 0):.0%} |"
            for (mode, step), (calls, prompt, cached) in sorted(result.per_step.items())
        ),
        "",
        "| mode | usage records' cost (USD) | scripted provider's invoice (USD) |",
        "|---|---:|---:|",
        *(
            f"| {mode} | {recorded:.8f} | {invoice:.8f} |"
            for mode, (recorded, invoice) in result.invoices.items()
        ),
        "",
        "| termination (deliberative) | turns | share |",
        "|---|---:|---:|",
        *(
            f"| `{reason}` | {n} | {n / total:.0%} |"
            for reason, n in sorted(result.terminations.items())
        ),
        "",
        "| reasoning steps per turn | turns |",
        "|---:|---:|",
        *(f"| {steps} | {n} |" for steps, n in sorted(result.steps.items())),
        "",
        "| refinement calls per turn | turns |",
        "|---:|---:|",
        *(f"| {calls} | {n} |" for calls, n in sorted(result.refinement_calls.items())),
    ]
    return "\n".join(lines)
