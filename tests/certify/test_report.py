"""The certificate's report: τ-bench's pass^k against hand-computed values, the aggregation of run
records per configuration, the injected-error table, the HTML escaped, the numbers byte-for-byte
the same for the same records, and the metadata without the API key."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from apps.certify.plan import Plan, spread_tasks
from apps.certify.records import InjectionOutcome, RunRecord, RunSpec
from apps.certify.report import (
    build_report,
    collect_metadata,
    numbers_bytes,
    pass_hat_k,
    percentile,
    render_html,
    write_report,
)
from apps.certify.retail.tasks import load_tasks

PLAN = Plan(
    model="m",
    base_url="http://127.0.0.1:9/v1",
    seed=42,
    configs=("bare", "adaptive"),
    k=2,
    inject_rate=0.5,
    inject_classes=("wrong_params", "invented_tool"),
    task_ids=("t1", "t2"),
    api_key="sk-never-written",
)
WHEN = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def record(config: str, task: str, trial: int, passed: bool, **fields: object) -> RunRecord:
    spec = RunSpec(
        config=config,
        task_id=task,
        trial=trial,
        seed=42,
        model="m",
        base_url=PLAN.base_url,
        api_key=PLAN.api_key,
        inject_rate=0.5,
        inject_classes=PLAN.inject_classes,
    )
    return RunRecord(spec=spec, passed=passed, **fields)


def records() -> list[RunRecord]:
    return [
        record(
            "bare",
            "t1",
            0,
            False,
            differences=["orders.#W1.status: expected 'pending', found 'cancelled'"],
            wrong_state_changes=1,
            unsafe_actions=1,
            prompt_tokens=1000,
            cached_tokens=400,
            completion_tokens=100,
            cost_usd=0.01,
            latency_s=1.0,
            injections=[InjectionOutcome("wrong_params", "reached_back_office", None, "x")],
        ),
        record("bare", "t1", 1, True, prompt_tokens=800, cost_usd=0.005, latency_s=2.0),
        record("bare", "t2", 0, True, handed_off=True, latency_s=3.0, cost_usd=0.0),
        record(
            "bare",
            "t2",
            1,
            False,
            missing_outputs=["75.51"],
            latency_s=4.0,
            injections=[InjectionOutcome("invented_tool", "reached_customer", None, "y")],
        ),
        record(
            "adaptive",
            "t1",
            0,
            True,
            latency_s=5.0,
            injections=[
                InjectionOutcome("wrong_params", "caught", "confirmation", "held"),
                InjectionOutcome("invented_tool", "caught", "unknown_tool", "refused"),
                InjectionOutcome("invented_tool", "caught", "unknown_tool", "refused"),
                InjectionOutcome("invented_tool", "harmless", None, ""),
            ],
        ),
        record("adaptive", "t1", 1, True, latency_s=6.0),
        record("adaptive", "t2", 0, True, latency_s=7.0),
        record("adaptive", "t2", 1, True, latency_s=8.0),
    ]


def report_of(recs: list[RunRecord], **meta: object) -> dict:
    return build_report(PLAN, recs, {"endpoint": PLAN.base_url, **meta})


def test_pass_hat_k_is_tau_bench_estimator():
    # t: 4 of 4, 2 of 4, 0 of 4 — C(c,k)/C(4,k) averaged over the three tasks.
    assert pass_hat_k({"a": (4, 4), "b": (4, 2), "c": (4, 0)}) == {
        1: 0.5,  # (1 + 2/4 + 0) / 3
        2: 0.388889,  # (1 + 1/6 + 0) / 3 = 7/18
        3: 0.333333,  # (1 + 0 + 0) / 3
        4: 0.333333,
    }
    # One task, 3 of 4: 3/4, C(3,2)/C(4,2) = 1/2, C(3,3)/C(4,3) = 1/4, then 0.
    assert pass_hat_k({"a": (4, 3)}) == {1: 0.75, 2: 0.5, 3: 0.25, 4: 0.0}
    # Uneven trial counts (an unfinished run): k stops at the smallest n.
    assert pass_hat_k({"a": (3, 3), "b": (2, 1)}) == {1: 0.75, 2: 0.5}
    assert pass_hat_k({}) == {}


def test_percentile_interpolates_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.95) == 3.85
    assert percentile([], 0.5) == 0.0


def test_results_per_configuration():
    report = report_of(records())
    bare, adaptive = report["results"]["bare"], report["results"]["adaptive"]
    assert list(report["results"]) == ["bare", "adaptive"]
    assert (bare["runs"], bare["passed"], bare["errors"]) == (4, 2, 0)
    # t1: 1 of 2, t2: 1 of 2 -> pass^1 = 0.5, pass^2 = 0.
    assert bare["pass_hat_k"] == {"1": 0.5, "2": 0.0}
    assert adaptive["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert bare["tasks"] == {"t1": {"trials": 2, "passed": 1}, "t2": {"trials": 2, "passed": 1}}
    assert bare["wrong_state_changes"] == {"total": 1, "runs_with_any": 1, "per_conversation": 0.25}
    assert bare["unsafe_actions"]["total"] == 1 and adaptive["unsafe_actions"]["total"] == 0
    assert (bare["handed_off"], bare["hand_off_rate"]) == (1, 0.25)
    assert bare["totals"]["prompt_tokens"] == 1800 and bare["totals"]["cached_tokens"] == 400
    assert bare["per_conversation"]["prompt_tokens"] == 450.0
    assert bare["per_conversation"]["cost_usd"] == 0.00375
    assert [(f["task_id"], f["trial"]) for f in bare["failures"]] == [("t1", 0), ("t2", 1)]
    assert bare["failures"][1]["missing_outputs"] == ["75.51"]
    assert report["timings"]["bare"]["latency_s"] == {
        "p50": 2.5,
        "p95": 3.85,
        "mean": 2.5,
        "max": 4.0,
    }
    assert report["complete"] is True


def test_injected_error_table_counts_outcomes_and_guards():
    report = report_of(records())
    bare = report["results"]["bare"]["injections"]
    adaptive = report["results"]["adaptive"]["injections"]
    assert list(adaptive) == ["invented_tool", "wrong_params"]  # the enabled classes, sorted
    assert adaptive["invented_tool"] == {
        "injected": 3,
        "caught": 2,
        "reached_customer": 0,
        "reached_back_office": 0,
        "harmless": 1,
        "guards": {"unknown_tool": 2},
    }
    assert adaptive["wrong_params"]["guards"] == {"confirmation": 1}
    assert bare["wrong_params"]["reached_back_office"] == 1
    assert bare["invented_tool"]["reached_customer"] == 1 and bare["invented_tool"]["caught"] == 0


def test_the_last_record_of_a_run_wins_and_strangers_are_ignored():
    errored = record("adaptive", "t2", 1, False, error="ConnectionError: refused")
    stranger = record("standard", "t1", 0, False)
    report = report_of([errored, *records(), stranger])
    assert "standard" not in report["results"]
    assert report["results"]["adaptive"]["errors"] == 0
    report = report_of([*records(), errored])
    assert report["results"]["adaptive"]["errors"] == 1
    assert report["results"]["adaptive"]["passed"] == 3
    assert report_of(records()[:-1])["complete"] is False


def test_the_numbers_are_the_same_bytes_for_the_same_records(tmp_path):
    first = report_of(records(), started_at="2026-11-30T01:00:00+00:00")
    shuffled = list(reversed(records()))
    for rec in shuffled:
        rec.latency_s += 0.37  # wall time is never repeatable; it is not among the numbers
    second = report_of(shuffled, started_at="2026-11-30T02:00:00+00:00")
    assert numbers_bytes(first) == numbers_bytes(second)
    assert first["numbers_sha256"] == second["numbers_sha256"]
    assert first["timings"] != second["timings"]

    write_report(tmp_path / "a", first)
    write_report(tmp_path / "b", second)
    a = json.loads((tmp_path / "a" / "certificate.json").read_text())
    b = json.loads((tmp_path / "b" / "certificate.json").read_text())
    for part in ("format", "plan", "results", "complete", "numbers_sha256"):
        assert json.dumps(a[part], sort_keys=True) == json.dumps(b[part], sort_keys=True)
    assert a["metadata"]["started_at"] != b["metadata"]["started_at"]

    changed = records()
    changed[1].passed = False
    assert report_of(changed)["numbers_sha256"] != first["numbers_sha256"]


def test_runs_on_a_model_without_a_price_are_marked():
    recs = records()
    for rec in recs[:2]:
        rec.__dict__["unpriced"] = True  # the runner's flag: cost 0, not measured
    report = report_of(recs)
    assert report["results"]["bare"]["unpriced_runs"] == 2
    assert report["results"]["adaptive"]["unpriced_runs"] == 0
    assert "(not priced: 2 runs)" in render_html(report)


def test_html_escapes_everything_and_has_no_script():
    hostile = "<script>alert(1)</script>"
    recs = records()
    recs[0].differences = [f"orders.{hostile}.status"]
    recs[3].missing_outputs = ['"><img src=x onerror=alert(2)>']
    report = report_of(recs, endpoint=f"http://x/{hostile}")
    html = render_html(report)
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert html.startswith("<!doctype html>") and "<style>" in html
    assert "pass^2" in html and "unknown_tool ×2" in html
    assert "<link" not in html and "src=" not in html.replace("src=x", "")


def test_metadata_has_versions_settings_and_no_key(settings):
    settings.OPENAI_API_KEY = "sk-settings-secret"
    meta = collect_metadata(PLAN, started_at=WHEN, finished_at=WHEN, tasks_digest="abc")
    packages = meta["versions"]["packages"]
    assert packages["django"] and packages["openai"]
    assert meta["versions"]["python"].count(".") == 2
    assert meta["settings"]["LLM_MODEL"] == settings.LLM_MODEL
    assert not [name for name in meta["settings"] if "KEY" in name or "SECRET" in name]
    assert meta["endpoint"] == PLAN.base_url and meta["task_ids"] == ["t1", "t2"]
    report = build_report(PLAN, records(), meta)
    text = json.dumps(report) + render_html(report)
    assert "sk-never-written" not in text and "sk-settings-secret" not in text


def test_spread_tasks_covers_the_kinds_of_request():
    _, _, tasks = load_tasks()
    chosen = spread_tasks(tasks, 8)
    assert chosen == sorted(set(chosen)) and len(chosen) == 8
    by_id = {t.task_id: t for t in tasks}
    assert len({by_id[t].tags[-1] for t in chosen}) == 8  # eight different kinds
    assert spread_tasks(tasks, 8) == chosen
    assert len(spread_tasks(tasks, 1000)) == len(tasks)


@pytest.mark.parametrize(
    ("change", "expected"),
    [({"k": 3}, "k: 2 -> 3"), ({"seed": 7}, "seed: 42 -> 7"), ({"task_ids": ("t1",)}, "task_ids")],
)
def test_plan_differences_name_what_changed(change, expected):
    from dataclasses import replace

    other = replace(PLAN, **change)
    assert any(expected in line for line in other.differences(PLAN))
    assert replace(PLAN, base_url="http://elsewhere/v1").differences(PLAN) == []
