"""The certificate's report: the run records of one plan aggregated into `certificate.json` and
a self-contained `certificate.html`.

The JSON has four parts:

- `plan` and `results` — **the numbers**: pass^k, safety counts, hand-offs, tokens and cost per
  conversation, the injected-error table, the failed runs. They are a pure function of the
  records (sorted, rounded, no clock), so two runs of the same plan with a deterministic model
  give the same bytes; `numbers_sha256` is their digest, to compare two certificates at a glance.
- `timings` — the measured latencies (p50/p95 per conversation): wall time, never repeatable.
- `metadata` — what produced it: versions, the settings that matter, the endpoint (never the
  API key), the tasks file, the times it started and finished.

pass^k is τ-bench's: for a task tried n times with c successes, the chance that k trials drawn
from its n all pass is C(c, k) / C(n, k); pass^k is its mean over the tasks, for k = 1 … n.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from math import comb
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from apps.certify.injections import CLASSES
from apps.certify.plan import COMPARED, Plan
from apps.certify.records import OUTCOMES, RunRecord

FORMAT = 1  # certificate.json's layout; bumped when a field changes meaning
DIGITS = 6  # rounding of every ratio and mean in the numbers
PACKAGES = ("django", "openai", "djangorestframework", "celery", "mcp", "httpx", "jsonschema")
# The settings that change what a run does (models, budgets, guards' thresholds); none is secret.
SETTING_PREFIXES = ("LLM_", "REASONING_", "EMBEDDING_", "BILLING_", "TOOL_WEBHOOK_")
SECRET_WORDS = ("KEY", "SECRET", "PASSWORD")


# --- the numbers -----------------------------------------------------------------------------


def pass_hat_k(trials: Mapping[str, tuple[int, int]]) -> dict[int, float]:
    """τ-bench's pass^k for k = 1 … n from {task: (n trials, c successes)}. With uneven trial
    counts (an unfinished run) k stops at the smallest n."""
    if not trials:
        return {}
    most = min(n for n, _ in trials.values())
    result: dict[int, float] = {}
    for k in range(1, most + 1):
        total = sum(
            (Fraction(comb(c, k), comb(n, k)) for n, c in trials.values()), start=Fraction(0)
        )
        result[k] = round(float(total / len(trials)), DIGITS)
    return result


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` quantile by linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (position - low), DIGITS)


def latest(records: Iterable[RunRecord]) -> list[RunRecord]:
    """One record per run (the last one written wins: a rerun after a harness error), sorted by
    configuration, task and trial so the order runs finished in never matters."""
    by_key = {record.spec.key(): record for record in records}
    return [by_key[key] for key in sorted(by_key)]


def _mean(total: float, count: int) -> float:
    return round(total / count, DIGITS) if count else 0.0


def injection_table(records: Sequence[RunRecord], classes: Sequence[str]) -> dict[str, Any]:
    """{class: {injected, caught, reached_customer, reached_back_office, harmless, guards}}."""
    table: dict[str, dict[str, Any]] = {}
    for name in classes:
        table[name] = {"injected": 0, **dict.fromkeys(OUTCOMES, 0), "guards": {}}
    guards: dict[str, Counter[str]] = defaultdict(Counter)
    for record in records:
        for injection in record.injections:
            row = table.setdefault(
                injection.error_class, {"injected": 0, **dict.fromkeys(OUTCOMES, 0), "guards": {}}
            )
            row["injected"] += 1
            row[injection.outcome] = row.get(injection.outcome, 0) + 1
            if injection.outcome == "caught":
                guards[injection.error_class][injection.guard or "unnamed"] += 1
    for name, counter in guards.items():
        table[name]["guards"] = dict(sorted(counter.items()))
    return dict(sorted(table.items()))


def config_results(records: Sequence[RunRecord], classes: Sequence[str]) -> dict[str, Any]:
    """The numbers of one configuration's records."""
    runs = len(records)
    trials: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in records:
        trials[record.spec.task_id][0] += 1
        trials[record.spec.task_id][1] += int(record.passed)
    wrong = sum(r.wrong_state_changes for r in records)
    unsafe = sum(r.unsafe_actions for r in records)
    handed_off = sum(1 for r in records if r.handed_off)
    totals = {
        "prompt_tokens": sum(r.prompt_tokens for r in records),
        "cached_tokens": sum(r.cached_tokens for r in records),
        "completion_tokens": sum(r.completion_tokens for r in records),
        "llm_calls": sum(r.llm_calls for r in records),
        "customer_turns": sum(r.customer_turns for r in records),
        "cost_usd": round(sum(r.cost_usd for r in records), DIGITS),
    }
    return {
        "runs": runs,
        "passed": sum(1 for r in records if r.passed),
        "errors": sum(1 for r in records if r.error),
        # A real model without a price: its cost is 0, not measured (the runner says so).
        "unpriced_runs": sum(1 for r in records if getattr(r, "unpriced", False)),
        "pass_hat_k": {
            str(k): v for k, v in pass_hat_k({t: (n, c) for t, (n, c) in trials.items()}).items()
        },
        "tasks": {t: {"trials": n, "passed": c} for t, (n, c) in sorted(trials.items())},
        "wrong_state_changes": {
            "total": wrong,
            "runs_with_any": sum(1 for r in records if r.wrong_state_changes),
            "per_conversation": _mean(wrong, runs),
        },
        "unsafe_actions": {
            "total": unsafe,
            "runs_with_any": sum(1 for r in records if r.unsafe_actions),
            "per_conversation": _mean(unsafe, runs),
        },
        "handed_off": handed_off,
        "hand_off_rate": _mean(handed_off, runs),
        "totals": totals,
        "per_conversation": {name: _mean(value, runs) for name, value in totals.items()},
        "injections": injection_table(records, classes),
        "failures": [
            {
                "task_id": r.spec.task_id,
                "trial": r.spec.trial,
                "differences": list(r.differences),
                "missing_outputs": list(r.missing_outputs),
                "error": r.error,
            }
            for r in records
            if not r.passed
        ],
    }


def enabled_classes(plan: Plan) -> list[str]:
    if plan.inject_rate <= 0:
        return []
    return list(plan.inject_classes or CLASSES)


def plan_numbers(plan: Plan) -> dict[str, Any]:
    """The plan as the numbers show it: what a rerun must share (the endpoint is metadata)."""
    data = plan.to_json()
    return {name: data[name] for name in COMPARED}


def build_report(
    plan: Plan, records: Iterable[RunRecord], metadata: Mapping[str, Any]
) -> dict[str, Any]:
    """The whole certificate from the plan's records (records of other plans are ignored)."""
    planned = {spec.key() for spec in plan.specs()}
    chosen = [r for r in latest(records) if r.spec.key() in planned]
    classes = enabled_classes(plan)
    results: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    for config in plan.configs:
        mine = [r for r in chosen if r.spec.config == config]
        results[config] = config_results(mine, classes)
        latencies = [r.latency_s for r in mine]
        timings[config] = {
            "latency_s": {
                "p50": percentile(latencies, 0.5),
                "p95": percentile(latencies, 0.95),
                "mean": _mean(sum(latencies), len(latencies)),
                "max": round(max(latencies, default=0.0), DIGITS),
            }
        }
    report: dict[str, Any] = {
        "format": FORMAT,
        "plan": plan_numbers(plan),
        "results": results,
        "complete": len(chosen) == len(planned),
    }
    report["numbers_sha256"] = hashlib.sha256(numbers_bytes(report)).hexdigest()
    report["timings"] = timings
    report["metadata"] = dict(metadata)
    return report


def numbers_bytes(report: Mapping[str, Any]) -> bytes:
    """The canonical bytes of the repeatable part: format, plan, results, complete."""
    part = {name: report[name] for name in ("format", "plan", "results", "complete")}
    return json.dumps(part, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


# --- the metadata ----------------------------------------------------------------------------


def git_commit(directory: Path) -> dict[str, Any]:
    """GuideDesk's commit and whether tracked files differ from it; None values without git."""
    try:
        head = _git(directory, "rev-parse", "HEAD")
        dirty = _git(directory, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head, "dirty": bool(dirty)}


def _git(directory: Path, *args: str) -> str:
    """What `git <args>` prints in `directory`, stripped; raises when git fails."""
    return subprocess.run(  # noqa: S603 - fixed git arguments, no shell
        ["git", *args],  # noqa: S607 - git from PATH, as the developer runs it
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout.strip()


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def relevant_settings() -> dict[str, Any]:
    """The LLM, reasoning, billing-reserve and webhook settings (never a key or secret)."""
    chosen: dict[str, Any] = {}
    for name in sorted(dir(settings)):
        if not name.startswith(SETTING_PREFIXES) or any(w in name for w in SECRET_WORDS):
            continue
        value = getattr(settings, name)
        if isinstance(value, (str, int, float, bool, type(None))):
            chosen[name] = value
        elif isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, int, float)) for v in value
        ):
            chosen[name] = list(value)
    return chosen


def endpoint(plan: Plan) -> str:
    if plan.model == "offline":
        return "offline (in process, no HTTP)"
    return plan.base_url or "none given"


def collect_metadata(
    plan: Plan, *, started_at: datetime, finished_at: datetime, tasks_digest: str | None = None
) -> dict[str, Any]:
    return {
        "model": plan.model,
        "endpoint": endpoint(plan),
        "seed": plan.seed,
        "task_ids": list(plan.task_ids),
        "tasks_world_digest": tasks_digest,
        "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
        "finished_at": finished_at.astimezone(UTC).isoformat(timespec="seconds"),
        "versions": {
            "guidedesk": git_commit(Path(settings.BASE_DIR)),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "packages": package_versions(),
        },
        "settings": relevant_settings(),
        "settings_module": os.environ.get("DJANGO_SETTINGS_MODULE"),
    }


# --- the HTML --------------------------------------------------------------------------------

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #1b1f24;
  padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
h3 { font-size: 1rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .6rem; text-align: right; vertical-align: top; }
th:first-child, td:first-child, td.text { text-align: left; }
thead th { background: #f6f8fa; }
.muted { color: #57606a; } .bad { color: #b42318; font-weight: 600; } .good { color: #1a7f37; }
code { font-family: ui-monospace, monospace; font-size: .9em; }
details { margin: .4rem 0; } summary { cursor: pointer; }
ul { margin: .2rem 0; padding-left: 1.2rem; }
"""


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> SafeString:
    header = format_html_join("", "<th>{}</th>", ((h,) for h in head))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows),
    )
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", header, body)


def _per_configuration(
    results: Mapping[str, Any],
    head: Sequence[str],
    row: Callable[[str, Mapping[str, Any]], Sequence[Any]],
) -> SafeString:
    """A table with a row per configuration: its name, then `row(configuration, result)`."""
    return _table(
        ["configuration", *head], ([config, *row(config, r)] for config, r in results.items())
    )


def _ratio(value: float) -> str:
    return f"{value:.3f}"


def _money(value: float) -> str:
    return f"${value:.4f}"


def _cost(value: float, result: Mapping[str, Any]) -> str:
    """Money, or what it is not: a run on a model without a price costs 0, unmeasured."""
    if result.get("unpriced_runs"):
        return f"{_money(value)} (not priced: {result['unpriced_runs']} runs)"
    return _money(value)


def _count(value: int) -> SafeString:
    return format_html('<span class="{}">{}</span>', "bad" if value else "good", value)


def _guards(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} ×{count}" for name, count in row["guards"].items()) or "—"


def render_html(report: Mapping[str, Any]) -> str:
    plan = report["plan"]
    results: Mapping[str, Any] = report["results"]
    timings: Mapping[str, Any] = report["timings"]
    meta: Mapping[str, Any] = report["metadata"]
    configs = list(results)
    k = max((len(r["pass_hat_k"]) for r in results.values()), default=0)
    parts: list[SafeString] = []
    parts.append(
        format_html(
            "<h1>GuideDesk reliability certificate</h1>"
            '<p class="muted">Model <code>{}</code> at {} · seed {} · {} tasks × {} trials · '
            "configurations {} · injected errors at rate {} ({}){}</p>",
            plan["model"],
            meta.get("endpoint", ""),
            plan["seed"],
            len(plan["task_ids"]),
            plan["k"],
            ", ".join(plan["configs"]),
            plan["inject_rate"],
            ", ".join(plan["inject_classes"]) or "every class",
            "" if report["complete"] else " · INCOMPLETE: some planned runs have no record",
        )
    )
    parts.append(format_html("<h2>{}</h2>", "Reliability: pass^k"))
    parts.append(
        format_html(
            '<p class="muted">{}</p>',
            "pass^k: the chance that k independent trials of a task all pass, averaged over the "
            "tasks (τ-bench's estimator C(c,k)/C(n,k) from n trials with c successes).",
        )
    )
    parts.append(
        _per_configuration(
            results,
            ["runs", "passed", "harness errors"] + [f"pass^{i}" for i in range(1, k + 1)],
            lambda config, r: (
                [r["runs"], r["passed"], r["errors"]]
                + [
                    _ratio(r["pass_hat_k"][str(i)]) if str(i) in r["pass_hat_k"] else "—"
                    for i in range(1, k + 1)
                ]
            ),
        )
    )
    parts.append(format_html("<h2>{}</h2>", "Safety and hand-offs"))
    parts.append(
        _per_configuration(
            results,
            [
                "wrong state changes",
                "runs with one",
                "unsafe actions (destructive, unconfirmed)",
                "runs with one",
                "hand-off rate",
            ],
            lambda config, r: [
                _count(r["wrong_state_changes"]["total"]),
                r["wrong_state_changes"]["runs_with_any"],
                _count(r["unsafe_actions"]["total"]),
                r["unsafe_actions"]["runs_with_any"],
                _ratio(r["hand_off_rate"]),
            ],
        )
    )
    parts.append(format_html("<h2>{}</h2>", "Cost, tokens and latency per conversation"))
    parts.append(
        _per_configuration(
            results,
            [
                "prompt tokens",
                "of which cached",
                "completion tokens",
                "LLM calls",
                "customer turns",
                "cost",
                "total cost",
                "latency p50 (s)",
                "latency p95 (s)",
            ],
            lambda config, r: [
                f"{r['per_conversation']['prompt_tokens']:.1f}",
                f"{r['per_conversation']['cached_tokens']:.1f}",
                f"{r['per_conversation']['completion_tokens']:.1f}",
                f"{r['per_conversation']['llm_calls']:.2f}",
                f"{r['per_conversation']['customer_turns']:.2f}",
                _cost(r["per_conversation"]["cost_usd"], r),
                _cost(r["totals"]["cost_usd"], r),
                f"{timings[config]['latency_s']['p50']:.2f}",
                f"{timings[config]['latency_s']['p95']:.2f}",
            ],
        )
    )
    parts.append(format_html("<h2>{}</h2>", "Injected errors"))
    parts.append(
        format_html(
            '<p class="muted">{}</p>',
            "Each injected model error, by what became of it: written to the back office (a "
            "tool ran with it), told to the customer, caught by a guard (named), or harmless "
            "(nothing came of it).",
        )
    )
    for config in configs:
        table = results[config]["injections"]
        parts.append(format_html("<h3>{}</h3>", config))
        if not table:
            parts.append(format_html('<p class="muted">{}</p>', "No injection in this run."))
            continue
        parts.append(
            _table(
                [
                    "error class",
                    "injected",
                    "reached back office",
                    "reached customer",
                    "caught",
                    "harmless",
                    "caught by",
                ],
                (
                    [
                        name,
                        row["injected"],
                        _count(row["reached_back_office"]),
                        _count(row["reached_customer"]),
                        row["caught"],
                        row["harmless"],
                        _guards(row),
                    ]
                    for name, row in table.items()
                ),
            )
        )
    parts.append(format_html("<h2>{}</h2>", "Tasks"))
    task_ids = sorted({t for r in results.values() for t in r["tasks"]})
    parts.append(
        _table(
            ["task", *configs],
            (
                [task_id]
                + [
                    "{passed}/{trials}".format(**results[c]["tasks"][task_id])
                    if task_id in results[c]["tasks"]
                    else "—"
                    for c in configs
                ]
                for task_id in task_ids
            ),
        )
    )
    parts.append(format_html("<h2>{}</h2>", "Failed runs"))
    for config in configs:
        failures = results[config]["failures"]
        items = format_html_join(
            "",
            "<li><code>{}</code> trial {}{}</li>",
            (
                (
                    f["task_id"],
                    f["trial"],
                    format_html(
                        "<ul>{}</ul>",
                        format_html_join(
                            "",
                            "<li>{}</li>",
                            (
                                (line,)
                                for line in [*f["differences"]]
                                + [f"not told: {o}" for o in f["missing_outputs"]]
                                + ([f"harness error: {f['error']}"] if f["error"] else [])
                            ),
                        ),
                    ),
                )
                for f in failures
            ),
        )
        parts.append(
            format_html(
                "<details><summary>{} — {} failed</summary><ul>{}</ul></details>",
                config,
                len(failures),
                items,
            )
        )
    parts.append(format_html("<h2>{}</h2>", "What produced it"))
    versions = meta.get("versions", {})
    guidedesk = versions.get("guidedesk", {})
    rows: list[list[Any]] = [
        [
            "GuideDesk commit",
            f"{guidedesk.get('commit')}{' (modified)' if guidedesk.get('dirty') else ''}",
        ],
        ["Python", f"{versions.get('python')} ({versions.get('implementation')})"],
        ["platform", versions.get("platform")],
        *[
            [name, version or "not installed"]
            for name, version in versions.get("packages", {}).items()
        ],
        ["model", plan["model"]],
        ["endpoint", meta.get("endpoint")],
        ["seed", plan["seed"]],
        ["max customer turns", plan["max_turns"]],
        ["tasks world digest", meta.get("tasks_world_digest")],
        ["tasks", ", ".join(plan["task_ids"])],
        ["started", meta.get("started_at")],
        ["finished", meta.get("finished_at")],
        ["numbers SHA-256", report["numbers_sha256"]],
        *[[name, json.dumps(value)] for name, value in meta.get("settings", {}).items()],
    ]
    parts.append(_table(["", "value"], rows))
    body = mark_safe("\n".join(parts))  # noqa: S308 — every part was built by format_html
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape('GuideDesk certificate — ' + str(plan['model']))}</title>"
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def report_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def write_report(out: Path, report: Mapping[str, Any]) -> tuple[Path, Path]:
    """Writes `certificate.json` and `certificate.html` into `out` (each replaced whole)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "certificate.json", out / "certificate.html")
    for path, text in zip(paths, (report_json(report), render_html(report)), strict=True):
        temporary = path.with_suffix(path.suffix + ".tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    return paths
