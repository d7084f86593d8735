"""A smoke test of `manage.py bench_modes` with a tiny number of turns."""

from __future__ import annotations

import pytest

from apps.billing.models import UsageRecord
from apps.clients.models import Client
from tests.benchmarks.conftest import bench

pytestmark = pytest.mark.django_db


def test_bench_modes_runs_the_mix_through_both_modes_and_cleans_up() -> None:
    text, warnings = bench("bench_modes", 5, markdown=True)
    assert "per mode: 3 simple / 1 context / 1 risky" in text
    for label in ("simple question", "needs extra context", "risky action", "weighted mix"):
        assert label in text
    ratio = text.split("adaptive ÷ standard: ")[1].split(" ")[0]
    assert 0 < float(ratio) < 1  # adaptive is cheaper on the demo tenant
    uncached = text.split("without prompt caching, adaptive ÷ standard: ")[1].split(" ")[0]
    assert 0 < float(uncached) < 1
    # adaptive's first call on the opening-hours question against standard's prompt
    first = text.split("adaptive ÷ standard prompt tokens: ")[1].split(" (")[0]
    adaptive, standard = (int(n.replace(",", "")) for n in first.split(" = ")[0].split(" ÷ "))
    assert 0 < adaptive < standard
    assert "did not run as scripted" not in warnings
    # the two throwaway tenants are gone
    assert not Client.objects.filter(slug__startswith="bench-").exists()
    assert not UsageRecord.objects.unscoped("test checks the database directly").exists()


def test_bench_modes_with_evaluation_adds_evaluate_calls_to_knowledge_answers_only() -> None:
    from devtools.benchmarks.modes import run_benchmark

    off = run_benchmark(turns=5, model="gpt-4o-mini", in_current_database=True)
    on = run_benchmark(turns=5, model="gpt-4o-mini", in_current_database=True, evaluation=True)

    for result in (off, on):
        assert not [p for t in result.tallies.values() for p in t.unexpected]
    for mode in ("standard", "adaptive"):
        # risky actions are never evaluated: the same calls with evaluation on and off
        assert on.tally(mode, "risky").llm_calls == off.tally(mode, "risky").llm_calls
        assert on.tally(mode, "risky").evaluated == 0
        # knowledge answers get one more call each when they are evaluated
        for scenario in ("simple", "context"):
            extra = on.tally(mode, scenario).llm_calls - off.tally(mode, scenario).llm_calls
            assert extra == on.tally(mode, scenario).evaluated
        evaluated, turns = on.evaluated(mode)
        assert 0 < evaluated < turns
        assert on.weighted(mode, "cost_usd") > off.weighted(mode, "cost_usd")
    assert off.evaluated("adaptive")[0] == 0


def test_bench_modes_command_reports_how_often_evaluation_triggers() -> None:
    text, _ = bench("bench_modes", 5, evaluation=True)
    assert "evaluation on" in text
    assert "Evaluation triggered in adaptive:" in text


def test_bench_modes_runs_deliberate_when_needed_and_reports_the_cached_share() -> None:
    text, warnings = bench("bench_modes", 15, markdown=True)
    assert "did not run as scripted" not in warnings
    assert "cached share" in text and "× adaptive cost" in text
    assert "| weighted mix (60/20/20) | as_needed |" in text
    line = text.split("deliberate when needed ÷ adaptive: ")[1]
    versus, deliberated = float(line.split(" ")[0]), int(line.split("(")[1].split(" ")[0])
    assert "provider cost $" in text and " = the scripted provider's own invoice" in text
    # The scripted complaint (1 of the 3 risky cases) deliberates; the rest stays adaptive.
    assert deliberated >= 1
    assert 1 < versus <= 3
