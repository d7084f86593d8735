"""`manage.py simulate` — run a client's test cases (or replay its escalated conversations) against
the live configuration and a candidate, print the side-by-side summary, optionally write a JUnit
XML file, and exit 1 when a candidate case fails: a business's CI can gate a change on it.

Exit status: 0 every candidate case passed; 1 a candidate case failed (or errored, or the run
failed); 2 a usage error (unknown client, suite or case, a bad date or file)."""

from __future__ import annotations

import json
import sys
import threading
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils.translation import gettext as _
from tqdm import tqdm

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.core.tenancy import tenant_scope
from apps.simulations.models import CaseRun, RunKind, RunSource, RunStatus, SimCase, SimulationRun
from apps.simulations.services import simulation_run_create, simulation_run_execute

USAGE = 2
FAILED = 1
DEMO_CLIENT = "trailhead"  # the demo shop of demo/tenant.json
POLL_SECONDS = 0.3


def usage_error(message: str) -> CommandError:
    return CommandError(message, returncode=USAGE)


def pick_client(slug: str | None) -> Client:
    """The client named, else the only active client, else the demo shop."""
    if slug:
        client = Client.objects.filter(slug=slug).first()
        if client is None:
            raise usage_error(_("No client with the slug %(slug)r.") % {"slug": slug})
        return client
    active = list(Client.objects.filter(is_active=True).order_by("pk")[:2])
    if len(active) == 1:
        return active[0]
    demo = Client.objects.filter(slug=DEMO_CLIENT).first()
    if demo is not None:
        return demo
    raise usage_error(
        _("Several clients (or none) and no demo shop: name one with --client SLUG.")
        if active
        else _("There is no client: import one first (manage.py import_client FILE).")
    )


def read_document(path: str) -> Any:
    """A JSON or YAML file's content (a business info document)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise usage_error(f"{path}: {exc.strerror or exc}") from None
    try:
        if file.suffix.lower() in {".yaml", ".yml"}:
            return yaml.safe_load(text)
        return json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise usage_error(f"{path}: {exc}") from None


def side_failures(report: dict[str, Any], side: str) -> list[dict[str, Any]]:
    """The report's cases whose `side` did not pass."""
    return [
        case
        for case in report.get("cases", [])
        if (case.get(side) or {}).get("status") not in (None, "passed")
    ]


def junit_xml(run: SimulationRun, report: dict[str, Any]) -> bytes:
    """One <testsuite> per side, one <testcase> per case; a failed case's <failure> lists its
    failed checks, an errored one's <error> says why. Judged criteria are the model's opinion:
    reported as a property, never as a failure."""
    durations: dict[tuple[str, str], int] = {}
    for name, side, ms in (
        CaseRun.objects.for_client(run.client)
        .filter(run=run)
        .values_list("case_name", "side", "duration_ms")
    ):
        durations[(name, side)] = durations.get((name, side), 0) + ms
    suites = ET.Element("testsuites", name=run.name or f"simulation {run.public_id}")
    for side in ("baseline", "candidate"):
        stats = (report.get("sides") or {}).get(side)
        if stats is None:
            continue
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=side,
            tests=str(stats.get("cases", 0)),
            failures=str(stats.get("failed", 0)),
            errors=str(stats.get("errors", 0)),
        )
        properties = ET.SubElement(suite, "properties")
        for key in ("pass_rate", "pass_hat_k", "cost_usd", "latency_p95_ms"):
            ET.SubElement(properties, "property", name=key, value=str(stats.get(key, "")))
        ET.SubElement(
            properties, "property", name="config", value=json.dumps(stats.get("config", {}))
        )
        for case in report.get("cases", []):
            result = case.get(side)
            if result is None:
                continue
            seconds = durations.get((case["name"], side), 0) / 1000
            testcase = ET.SubElement(
                suite, "testcase", classname=side, name=case["name"], time=f"{seconds:.3f}"
            )
            if result.get("judged_passed") is not None:
                judged = ET.SubElement(testcase, "properties")
                ET.SubElement(
                    judged,
                    "property",
                    name="judged_passed (the model's opinion)",
                    value=str(result["judged_passed"]).lower(),
                )
            checks = result.get("failed_checks") or []
            lines = [
                f"turn {c.get('turn') if c.get('turn') is not None else '-'}: "
                f"{c.get('expect')} {json.dumps(c.get('spec'))} — {c.get('detail', '')}"
                for c in checks
            ]
            attempts = f"{result.get('passed_attempts', 0)}/{result.get('attempts', 1)}"
            if result.get("status") == "error":
                node = ET.SubElement(testcase, "error", message=f"error ({attempts} passed)")
                node.text = "\n".join(lines)
            elif result.get("status") == "failed":
                first = lines[0] if lines else "failed"
                node = ET.SubElement(
                    testcase, "failure", message=f"{first} ({attempts} attempts passed)"
                )
                node.text = "\n".join(lines)
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def _rate(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.0f}%"


def _number(value: Any) -> str:
    """A figure for the table: floats with one decimal, None as "-", the rest as they are."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def _ratio(value: Any) -> str:
    return "-" if value is None else f"×{float(value):.2f}"


def summary_table(report: dict[str, Any]) -> str:
    """The sides side by side, the changes and the ratios, as plain text."""
    sides = report.get("sides") or {}
    names = [side for side in ("baseline", "candidate") if side in sides]
    rows: list[tuple[str, ...]] = [("", *names)]

    def row(label: str, key: str, fmt: Any = _number) -> None:
        rows.append((label, *(fmt(sides[n].get(key)) for n in names)))

    row(_("cases"), "cases")
    row(_("passed"), "passed")
    row(_("failed"), "failed")
    row(_("errors"), "errors")
    row(_("pass rate (code checks)"), "pass_rate", _rate)
    row(_("pass^k"), "pass_hat_k", _rate)
    rows.append(
        (
            _("judged (model's opinion)"),
            *(_rate((sides[n].get("judged") or {}).get("rate")) for n in names),
        )
    )
    row(_("LLM calls / turn"), "llm_calls_per_turn")
    row(_("tokens / turn"), "tokens_per_turn")
    row(_("cost / turn (USD)"), "cost_per_turn_usd")
    row(_("cost (USD)"), "cost_usd")
    row(_("latency p50 (ms)"), "latency_p50_ms")
    row(_("latency p95 (ms)"), "latency_p95_ms")
    row(_("escalations"), "escalations")
    row(_("tools ran"), "tools_ran")
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(r)) for r in rows]
    summary = report.get("summary") or {}
    if "baseline" in sides:
        lines.append("")
        lines.append(
            _("fixed %(fixed)s · broke %(broke)s · unchanged: %(up)s pass, %(uf)s fail")
            % {
                "fixed": summary.get("fixed", 0),
                "broke": summary.get("broke", 0),
                "up": summary.get("unchanged_pass", 0),
                "uf": summary.get("unchanged_fail", 0),
            }
        )
        ratio = report.get("ratio") or {}
        if ratio:
            lines.append(
                _("candidate / baseline: ")
                + ", ".join(f"{key} {_ratio(value)}" for key, value in ratio.items())
            )
        for case in report.get("cases", []):
            if case.get("change") in ("fixed", "broke"):
                extra = "; ".join(
                    [*case.get("tool_changes", []), case.get("escalation_change", "")]
                )
                lines.append(f"  {case['change']:>5}  {case['name']}  {extra.strip('; ')}")
    for case in side_failures(report, "candidate"):
        lines.append(_("FAILED %(name)s") % {"name": case["name"]})
        for check in (case.get("candidate") or {}).get("failed_checks", []):
            turn = check.get("turn")
            where = _("whole case") if turn is None else _("turn %(n)s") % {"n": turn}
            lines.append(f"    {where}: {check.get('expect')} — {check.get('detail', '')}")
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Run a client's simulation test cases (or replay its escalated conversations) in the "
        "sandbox against the live configuration (baseline) and a candidate with overrides, "
        "print the side-by-side summary and exit 1 when a candidate case fails (2 on a usage "
        "error). Runs in this process; nothing reaches a customer and no tool webhook is called."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--client", metavar="SLUG", help="Default: the only client or demo.")
        parser.add_argument("--suite", help="Only this suite's cases.")
        parser.add_argument(
            "--case", action="append", default=[], metavar="NAME", help="Only this case (repeat)."
        )
        parser.add_argument("--tag", action="append", default=[], help="Only cases with this tag.")
        parser.add_argument(
            "--replay-escalated",
            action="store_true",
            help="Replay saved conversations that were escalated instead of running cases.",
        )
        parser.add_argument("--since", metavar="YYYY-MM-DD", help="Replays: from this day.")
        parser.add_argument("--until", metavar="YYYY-MM-DD", help="Replays: up to this day.")
        parser.add_argument("--limit", type=int, default=100, help="Replays: at most this many.")
        parser.add_argument("--mode", help="Candidate: the reasoning mode.")
        parser.add_argument("--model", help="Candidate: the model (as LLM_MODEL names it).")
        parser.add_argument("--rubric", help="Candidate: the deliberative rubric.")
        parser.add_argument(
            "--no-evaluation", action="store_true", help="Candidate: the evaluation layer off."
        )
        parser.add_argument(
            "--business-info", metavar="FILE", help="Candidate: this business info (JSON/YAML)."
        )
        parser.add_argument(
            "--candidate-only", action="store_true", help="Do not run the baseline."
        )
        parser.add_argument("--name", default="", help="The run's name.")
        parser.add_argument("--junit", metavar="PATH", help="Write a JUnit XML file here.")
        parser.add_argument("--json", metavar="PATH", help="Write the report as JSON here.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        client = pick_client(options["client"])
        kind, selection = self.selection(client, options)
        overrides = self.overrides(options)
        try:
            run = simulation_run_create(
                client=client,
                source=RunSource.CLI,
                kind=kind,
                selection=selection,
                overrides=overrides,
                compare=not options["candidate_only"],
                name=options["name"],
                enqueue=False,
            )
        except ApplicationError as exc:
            fields = (exc.extra or {}).get("fields") or {}
            detail = "".join(f"\n  {path}: {message}" for path, message in fields.items())
            raise usage_error(exc.message + detail) from None
        self.execute_run(run, progress=self.wants_progress(options))
        run = SimulationRun.objects.for_client(client).get(pk=run.pk)
        report = run.report or {}
        self.stdout.write(
            _("Simulation %(name)s (%(client)s): %(status)s")
            % {"name": run.name or run.public_id, "client": client.slug, "status": run.status}
        )
        if report:
            self.stdout.write(summary_table(report))
        if run.error:
            self.stderr.write(run.error)
        if options["junit"]:
            Path(options["junit"]).write_bytes(junit_xml(run, report))
            self.stdout.write(_("JUnit XML: %(path)s") % {"path": options["junit"]})
        if options["json"]:
            Path(options["json"]).write_text(json.dumps(report, indent=2), encoding="utf-8")
        if run.status != RunStatus.DONE or side_failures(report, "candidate"):
            sys.exit(FAILED)

    def selection(self, client: Client, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if options["replay_escalated"]:
            if options["suite"] or options["case"] or options["tag"]:
                raise usage_error(_("--replay-escalated replays conversations, not cases."))
            replay: dict[str, Any] = {"escalated_only": True, "limit": options["limit"]}
            for key in ("since", "until"):
                if options[key]:
                    try:
                        replay[key] = date.fromisoformat(options[key]).isoformat()
                    except ValueError:
                        raise usage_error(
                            _("--%(key)s: not a date (YYYY-MM-DD): %(value)r")
                            % {"key": key, "value": options[key]}
                        ) from None
            return RunKind.REPLAY, replay
        if options["since"] or options["until"]:
            raise usage_error(_("--since and --until go with --replay-escalated."))
        cases = SimCase.objects.for_client(client)
        selection: dict[str, Any] = {}
        if options["suite"]:
            if not cases.filter(suite=options["suite"]).exists():
                raise usage_error(
                    _("Client %(client)s has no case in the suite %(suite)r.")
                    % {"client": client.slug, "suite": options["suite"]}
                )
            selection["suite"] = options["suite"]
        if options["tag"]:
            selection["tags"] = options["tag"]
        if options["case"]:
            found = dict(cases.filter(name__in=options["case"]).values_list("name", "public_id"))
            missing = [name for name in options["case"] if name not in found]
            if missing:
                raise usage_error(
                    _("No such case: %(names)s") % {"names": ", ".join(map(repr, missing))}
                )
            selection["cases"] = [str(found[name]) for name in options["case"]]
        return RunKind.CASES, selection

    def overrides(self, options: dict[str, Any]) -> dict[str, Any]:
        overrides: dict[str, Any] = {
            key: options[key] for key in ("mode", "model", "rubric") if options[key]
        }
        if options["no_evaluation"]:
            overrides["evaluation"] = False
        if options["business_info"]:
            overrides["business_info"] = read_document(options["business_info"])
        return overrides

    def wants_progress(self, options: dict[str, Any]) -> bool:
        return not options["no_progress"] and sys.stderr.isatty()

    def execute_run(self, run: SimulationRun, *, progress: bool) -> None:
        """Run it here; on a terminal, with a progress bar fed by the run's counters (the work
        runs in a thread with its own database connection while this one polls)."""
        if not progress:
            with tenant_scope(run.client_id):
                simulation_run_execute(run_id=run.pk)
            return
        failure: list[BaseException] = []

        def work() -> None:
            try:
                with tenant_scope(run.client_id):
                    simulation_run_execute(run_id=run.pk)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)
            finally:
                connection.close()

        worker = threading.Thread(target=work, name="simulate", daemon=True)
        worker.start()
        rows = SimulationRun.objects.for_client(run.client).filter(pk=run.pk)
        with tqdm(total=run.total or None, desc="simulate", unit="case", file=sys.stderr) as bar:
            while worker.is_alive():
                worker.join(POLL_SECONDS)
                counters = rows.values_list("completed", "total").first()
                if counters:
                    bar.total = counters[1] or bar.total
                    bar.n = counters[0]
                    bar.refresh()
        if failure:
            raise failure[0]
