"""`manage.py certify` — the reliability certificate: run configurations × retail tasks × trials
against a model (the offline one, or any OpenAI-compatible endpoint), record every run, and write
`certificate.json` and `certificate.html` (docs/certificate.md).

    manage.py certify --model offline --configs bare,adaptive,deliberative --k 4 --inject 0.2

Every finished run is appended to `OUT/runs.jsonl` at once (flushed and synced), so a crash or
Ctrl-C loses at most the run in progress and `--resume` carries on where it stopped. A run whose
estimated cost is over `--max-cost` does not start without `--yes`.

Exit status: 0 the report is written; 1 it is written but a run failed in the harness itself (an
error, not a failed task), or the runner is missing; 2 a usage error; 3 refused (the cost
estimate is over --max-cost, or `--resume` with another plan); 130 interrupted.

Operator output in English, like the other engineers' reports: no translation.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.certify.injections import CLASSES
from apps.certify.plan import Plan, spread_tasks
from apps.certify.records import CONFIGS, RunRecord, RunSpec
from apps.certify.report import build_report, collect_metadata, write_report
from apps.certify.retail.tasks import load_tasks

FAILED = 1
USAGE = 2
REFUSED = 3
INTERRUPTED = 130
OFFLINE = "offline"
RUNNER = "apps.certify.run"
DEFAULT_MAX_COST = 5.0
OPENAI_URL = "https://api.openai.com/v1"  # a model named without an endpoint
RUNS_FILE = "runs.jsonl"
PLAN_FILE = "plan.json"

RunOne = Callable[[RunSpec], RunRecord]
Estimate = Callable[[RunSpec], float]


def usage_error(message: str) -> CommandError:
    return CommandError(message, returncode=USAGE)


def load_runner() -> tuple[RunOne, Estimate]:
    """`run_one` and `estimate_cost_usd` of apps/certify/run.py, imported when the command runs."""
    try:
        module = importlib.import_module(RUNNER)
    except ModuleNotFoundError as exc:
        if exc.name != RUNNER:
            raise
        raise CommandError(
            "The certificate runner (apps/certify/run.py) is not installed.", returncode=FAILED
        ) from None
    return module.run_one, module.estimate_cost_usd


def check_migrated() -> None:
    """GuideDesk's configurations run turns in this database: every run would fail on a table
    that is not there, so say it once instead."""
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise usage_error(
            "The database has unapplied migrations: run manage.py migrate first "
            "(make certify does)."
        )


def split_list(value: str) -> list[str]:
    """`a, b,,a` -> [a, b]: comma-separated, blanks and repeats dropped, order kept."""
    seen: list[str] = []
    for item in (part.strip() for part in value.split(",")):
        if item and item not in seen:
            seen.append(item)
    return seen


def default_out(model: str, seed: int) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.") or "model"
    return Path.cwd() / f"certificate-{safe}-{seed}"


def duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class Progress:
    """Where the run is, on stderr: a bar redrawn in place on a terminal, one plain line per
    finished run otherwise (a CI log, a file). Spec n/N, configuration, task, trial, elapsed,
    ETA from this session's pace, and the cost so far."""

    WIDTH = 24

    def __init__(
        self,
        stream: OutputWrapper | TextIO,
        total: int,
        done: int,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.total = total
        self.done = done  # before this session
        self.finished = 0  # in this session
        self.cost = 0.0
        self.clock = clock
        self.started = clock()
        self.tty = stream.isatty() if tty is None else tty

    def _write(self, text: str, *, end: str = "\n") -> None:
        if isinstance(self.stream, OutputWrapper):  # plain, not stderr's red
            self.stream.write(text, style_func=lambda line: line, ending=end)
        else:
            self.stream.write(text + end)
        self.stream.flush()

    def _times(self) -> str:
        elapsed = self.clock() - self.started
        left = self.total - self.done - self.finished
        eta = duration(elapsed / self.finished * left) if self.finished else "?"
        return f"elapsed {duration(elapsed)} ETA {eta} ${self.cost:.4f}"

    def _where(self, spec: RunSpec) -> str:
        return (
            f"[{self.done + self.finished + 1}/{self.total}] "
            f"{spec.config} {spec.task_id} trial {spec.trial}"
        )

    def start(self, spec: RunSpec) -> None:
        if not self.tty:
            return
        share = (self.done + self.finished) / self.total if self.total else 1.0
        filled = int(share * self.WIDTH)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        self._write(f"\r\x1b[K{bar} {self._where(spec)} {self._times()}", end="")

    def finish(self, spec: RunSpec, record: RunRecord) -> None:
        where = self._where(spec)
        self.finished += 1
        self.cost += record.cost_usd
        verdict = "error" if record.error else ("passed" if record.passed else "failed")
        line = f"{where}: {verdict} in {record.latency_s:.1f}s, {self._times()}"
        if self.tty:
            self._write(f"\r\x1b[K{line}", end="")
        else:
            self._write(line)

    def close(self) -> None:
        if self.tty:
            self._write("")


def read_records(path: Path) -> list[RunRecord]:
    """The records of runs.jsonl. A last line cut off by a crash is dropped from the file (its
    run is done again); any other unreadable line is an error."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        os.truncate(path, keep)
        data = data[:keep]
    records = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(RunRecord.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise CommandError(
                f"{path}, line {number}, is not a run record ({exc}).", returncode=FAILED
            ) from None
    return records


def append_record(stream: Any, record: RunRecord) -> None:
    stream.write(json.dumps(record.to_json(), sort_keys=True, ensure_ascii=False) + "\n")
    stream.flush()
    os.fsync(stream.fileno())


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def error_record(spec: RunSpec, exc: BaseException) -> RunRecord:
    return RunRecord(spec=spec, passed=False, error=f"{type(exc).__name__}: {exc}"[:2000])


class Command(BaseCommand):
    help = (
        "Run the reliability certificate (configurations x retail tasks x trials) against a "
        "model and write certificate.json and certificate.html."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model", required=True, help='The model name; "offline": the offline model.'
        )
        parser.add_argument(
            "--base-url",
            help=f"An OpenAI-compatible endpoint (default: OPENAI_BASE_URL, else {OPENAI_URL}).",
        )
        parser.add_argument("--api-key", help="The endpoint's key (default: OPENAI_API_KEY).")
        parser.add_argument(
            "--configs",
            default="bare,adaptive,deliberative",
            help=f"Comma-separated, of {', '.join(CONFIGS)} (default: bare,adaptive,deliberative).",
        )
        parser.add_argument("--k", type=int, default=4, help="Trials per configuration and task.")
        parser.add_argument(
            "--inject", type=float, default=0.0, help="Share of model answers to corrupt, 0..1."
        )
        parser.add_argument(
            "--inject-classes", default="", help="Comma-separated error classes (default: all)."
        )
        tasks = parser.add_mutually_exclusive_group()
        tasks.add_argument("--tasks", help="Comma-separated task ids (default: every task).")
        tasks.add_argument(
            "--task-limit", type=int, help="N tasks spread over the kinds of request."
        )
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument("--max-turns", type=int, default=12, help="Customer turns per run.")
        parser.add_argument(
            "--out", help="The output folder (default: ./certificate-<model>-<seed>/)."
        )
        parser.add_argument(
            "--max-cost",
            type=float,
            default=DEFAULT_MAX_COST,
            help=f"Refuse to start above this estimate in USD (default {DEFAULT_MAX_COST:g}).",
        )
        parser.add_argument("--yes", action="store_true", help="Start even above --max-cost.")
        again = parser.add_mutually_exclusive_group()
        again.add_argument(
            "--resume", action="store_true", help="Carry on with the runs in OUT/runs.jsonl."
        )
        again.add_argument(
            "--overwrite", action="store_true", help="Discard OUT's runs and start again."
        )

    # --- the plan --------------------------------------------------------------------------

    def make_plan(self, options: dict[str, Any]) -> tuple[Plan, str]:
        model = (options["model"] or "").strip()
        if not model:
            raise usage_error("--model must name a model (or offline).")
        configs = split_list(options["configs"] or "")
        unknown = [c for c in configs if c not in CONFIGS]
        if unknown or not configs:
            raise usage_error(
                f"Unknown configuration {', '.join(map(repr, unknown)) or '(none)'}: "
                f"choose from {', '.join(CONFIGS)}."
            )
        if options["k"] < 1:
            raise usage_error(f"--k must be at least 1 (got {options['k']}).")
        rate = options["inject"]
        if not 0.0 <= rate <= 1.0:
            raise usage_error(f"--inject must be between 0 and 1 (got {rate:g}).")
        classes = split_list(options["inject_classes"] or "")
        unknown = [c for c in classes if c not in CLASSES]
        if unknown:
            raise usage_error(
                f"Unknown error class {', '.join(map(repr, unknown))}: "
                f"choose from {', '.join(CLASSES)}."
            )
        if options["max_turns"] < 1:
            raise usage_error(f"--max-turns must be at least 1 (got {options['max_turns']}).")
        if options["max_cost"] < 0:
            raise usage_error("--max-cost cannot be negative.")
        _, digest, tasks = load_tasks()
        known = {task.task_id for task in tasks}
        if options["tasks"] is not None:
            task_ids = split_list(options["tasks"])
            unknown = [t for t in task_ids if t not in known]
            if unknown or not task_ids:
                raise usage_error(
                    f"Unknown task {', '.join(map(repr, unknown)) or '(none)'}: the tasks are "
                    f"{min(known)} … {max(known)} (apps/certify/retail/tasks.json)."
                )
        elif options["task_limit"] is not None:
            if options["task_limit"] < 1:
                raise usage_error(f"--task-limit must be at least 1 (got {options['task_limit']}).")
            task_ids = spread_tasks(tasks, options["task_limit"])
        else:
            task_ids = sorted(known)
        offline = model == OFFLINE
        chosen_url = options["base_url"] or os.environ.get("OPENAI_BASE_URL") or None
        key = options["api_key"] or os.environ.get("OPENAI_API_KEY") or None
        base_url, api_key = (None, None) if offline else (chosen_url or OPENAI_URL, key)
        if not offline and not chosen_url and not api_key:
            raise usage_error(
                f"{model} at {OPENAI_URL} needs a key: --api-key or OPENAI_API_KEY "
                "(or --base-url for an endpoint without one)."
            )
        plan = Plan(
            model=model,
            base_url=base_url,
            seed=options["seed"],
            configs=tuple(configs),
            k=options["k"],
            inject_rate=rate,
            inject_classes=tuple(classes),
            task_ids=tuple(sorted(task_ids)),
            max_turns=options["max_turns"],
            api_key=api_key,
        )
        return plan, digest

    def previous_runs(
        self, plan: Plan, out: Path, options: dict[str, Any]
    ) -> tuple[list[RunRecord], str | None]:
        """The records this run continues (with --resume) and when they started."""
        runs, plan_file = out / RUNS_FILE, out / PLAN_FILE
        if not runs.exists():
            if options["resume"]:
                self.stdout.write(f"Nothing to resume in {out}: starting.")
            return [], None
        if options["overwrite"]:
            for name in (RUNS_FILE, PLAN_FILE, "certificate.json", "certificate.html"):
                (out / name).unlink(missing_ok=True)
            return [], None
        if not options["resume"]:
            raise usage_error(
                f"{out} already holds runs: --resume to carry on with them, --overwrite to "
                "start again, or another --out."
            )
        try:
            recorded = json.loads(plan_file.read_text(encoding="utf-8"))
            their_plan = Plan.from_json(recorded)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(
                f"{plan_file} is missing or unreadable ({exc}): cannot resume.", returncode=REFUSED
            ) from None
        differences = plan.differences(their_plan)
        if differences:
            raise CommandError(
                f"Cannot resume: the runs in {out} have another plan ("
                + "; ".join(differences)
                + "). Use the same flags, --overwrite, or another --out.",
                returncode=REFUSED,
            )
        records = read_records(runs)
        planned = {spec.key() for spec in plan.specs()}
        strangers = sorted({r.spec.key() for r in records} - planned)
        if strangers:
            raise CommandError(
                f"Cannot resume: {runs} holds runs outside the plan (first: {strangers[0]}).",
                returncode=REFUSED,
            )
        return records, recorded.get("started_at")

    # --- the run ---------------------------------------------------------------------------

    def handle(self, *args: Any, **options: Any) -> None:
        plan, digest = self.make_plan(options)
        out = (
            Path(options["out"]).resolve() if options["out"] else default_out(plan.model, plan.seed)
        )
        records, started_at = self.previous_runs(plan, out, options)
        run_one, estimate_cost = load_runner()
        check_migrated()

        done = {r.spec.key() for r in records if not r.error}
        specs = plan.specs()
        todo = [spec for spec in specs if spec.key() not in done]
        estimate = sum(estimate_cost(spec) for spec in todo)
        self.stdout.write(
            f"Plan: {len(plan.configs)} configurations × {len(plan.task_ids)} tasks × {plan.k} "
            f"trials = {len(specs)} runs; {len(specs) - len(todo)} done, {len(todo)} to run. "
            f"Estimated cost: at most ${estimate:.2f} (--max-cost ${options['max_cost']:.2f})."
        )
        if estimate > options["max_cost"] and not options["yes"]:
            raise CommandError(
                f"Not started: the estimated cost ${estimate:.2f} is over --max-cost "
                f"${options['max_cost']:.2f}. Rerun with --yes to go on, or raise --max-cost.",
                returncode=REFUSED,
            )

        out.mkdir(parents=True, exist_ok=True)
        started_at = started_at or datetime.now(UTC).isoformat(timespec="seconds")
        write_atomically(
            out / PLAN_FILE,
            json.dumps({**plan.to_json(), "started_at": started_at}, indent=2, sort_keys=True)
            + "\n",
        )
        progress = Progress(self.stderr, total=len(specs), done=len(specs) - len(todo))
        with (out / RUNS_FILE).open("a", encoding="utf-8") as stream:
            for spec in todo:
                progress.start(spec)
                try:
                    record = run_one(spec)
                except KeyboardInterrupt:
                    progress.close()
                    raise CommandError(
                        f"Interrupted: {len(specs) - len(todo) + progress.finished} of "
                        f"{len(specs)} runs are in {out / RUNS_FILE}; rerun with --resume to "
                        "carry on.",
                        returncode=INTERRUPTED,
                    ) from None
                except Exception as exc:  # one broken run must not end the rest
                    record = error_record(spec, exc)
                append_record(stream, record)
                records.append(record)
                progress.finish(spec, record)
        progress.close()

        metadata = collect_metadata(
            plan,
            started_at=datetime.fromisoformat(started_at),
            finished_at=datetime.now(UTC),
            tasks_digest=digest,
        )
        report = build_report(plan, records, metadata)
        json_path, html_path = write_report(out, report)
        for config, result in report["results"].items():
            ks = " ".join(f"pass^{k}={v:.3f}" for k, v in result["pass_hat_k"].items())
            self.stdout.write(
                f"{config}: {result['passed']}/{result['runs']} passed, {ks}, wrong state "
                f"changes {result['wrong_state_changes']['total']}, unsafe actions "
                f"{result['unsafe_actions']['total']}, hand-off rate "
                f"{result['hand_off_rate']:.3f}, ${result['per_conversation']['cost_usd']:.4f}"
                " per conversation"
            )
        self.stdout.write(f"Wrote {json_path} and {html_path}")
        errors = sum(result["errors"] for result in report["results"].values())
        if errors:
            raise CommandError(
                f"{errors} runs failed in the harness (see the report's failed runs); "
                "--resume runs them again.",
                returncode=FAILED,
            )
