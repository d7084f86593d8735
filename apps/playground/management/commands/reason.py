"""`manage.py reason --client SLUG "question"`: one turn outside any conversation, printed as
it happens (docs/playground.md)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.clients.models import Client
from apps.conversations.selectors import conversation_get
from apps.core.exceptions import ApplicationError
from apps.core.tenancy import tenant_scope
from apps.playground.models import PlaygroundRun, PlaygroundStep, RunSource, RunStatus
from apps.playground.selectors import run_json
from apps.playground.services import (
    playground_modes,
    playground_run_create,
    playground_run_execute,
)
from apps.reasoning.modes import mode_that_runs

BAR_WIDTH = 20


def progress_bar(step: int, total: int, width: int = BAR_WIDTH) -> str:
    """`[########------------] 4/10`"""
    total = max(total, 1)
    filled = round(width * min(step, total) / total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {step}/{total}"


def score_bar(value: float, width: int = 10) -> str:
    value = min(max(value, 0.0), 1.0)
    filled = round(width * value)
    return f"{'█' * filled}{'·' * (width - filled)} {value:.2f}"


class StepPrinter:
    """Prints each step as the run records it."""

    def __init__(self, out: Any, *, full: bool, pause: bool, run: PlaygroundRun) -> None:
        self.out = out
        self.full = full
        self.pause = pause
        self.run = run

    def cut(self, text: Any, limit: int = 300) -> str:
        text = str(text or "").strip()
        if self.full or len(text) <= limit:
            return text
        return text[: limit - 1] + "…"

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, step: PlaygroundStep) -> None:
        out, name = step.output or {}, step.name
        tokens = step.prompt_tokens + step.completion_tokens
        meta = f" · {tokens} tokens, {step.latency_ms} ms" if tokens else ""
        self.line(f"[{step.index}] {name}{meta}")
        if step.error:
            self.line(f"    error: {self.cut(step.error)}")
        renderer = getattr(self, f"show_{name}", None)
        if renderer is not None:
            renderer(out)
        elif out:
            self.line(f"    {self.cut(json.dumps(out, ensure_ascii=False, sort_keys=True))}")
        if self.pause and sys.stdin.isatty():
            answer = input("    — Enter for the next step, q to stop — ")
            if answer.strip().lower().startswith("q"):
                PlaygroundRun.objects.filter(pk=self.run.pk, client_id=self.run.client_id).update(
                    stop_requested=True
                )

    # -- the step kinds worth a reading layout -------------------------------------------------
    def show_reason_step(self, out: dict[str, Any]) -> None:
        step, total = int(out.get("step") or 0), int(out.get("max_steps") or 0)
        status = str(out.get("status") or "").upper()
        mean = out.get("mean")
        mean_text = f" · mean {float(mean):.2f}" if isinstance(mean, int | float) else ""
        self.line(f"    {progress_bar(step, total)} {status}{mean_text}")
        self.line(f"    {self.cut(out.get('content'))}")
        for key, value in (out.get("scores") or {}).items():
            if isinstance(value, int | float):
                self.line(f"      {key:<22} {score_bar(float(value))}")
        if out.get("rationale"):
            self.line(f"    rationale: {self.cut(out['rationale'])}")
        for hypothesis in out.get("hypotheses") or []:
            if isinstance(hypothesis, dict):
                self.line(
                    f"    hypothesis: {hypothesis.get('intent')} ({hypothesis.get('confidence')})"
                )

    def show_feedback(self, out: dict[str, Any]) -> None:
        self.line(
            f"    [Server Feedback from Step {out.get('step')}]: {self.cut(out.get('feedback'))}"
        )

    def show_refinement(self, out: dict[str, Any]) -> None:
        state = str(out.get("state") or "?")
        head = f"    {state} (iteration {out.get('iteration')})"
        if out.get("score") is not None:
            head += f" · score {out['score']}/100"
        self.line(head)
        if out.get("failure"):
            self.line(f"    failure: {out['failure']}")
        if out.get("text"):
            self.line(f"    {self.cut(out['text'])}")
        if out.get("critique"):
            self.line(f"    critique: {self.cut(out['critique'])}")
        for issue in out.get("issues") or []:
            if isinstance(issue, dict):
                self.line(
                    f"    - [{issue.get('kind')}] “{self.cut(issue.get('quote'), 80)}”: "
                    f"{self.cut(issue.get('problem'), 160)}"
                )

    def show_refine_critique(self, out: dict[str, Any]) -> None:
        self.line(f"    critique call · score {out.get('score')}/100")

    def show_improve(self, out: dict[str, Any]) -> None:
        self.line(f"    improved: {self.cut(out.get('response'))}")

    def show_guard(self, out: dict[str, Any]) -> None:
        self.line(f"    {out.get('action')} {out.get('tool') or ''} — {out.get('reason')}")

    def show_deliberation_end(self, out: dict[str, Any]) -> None:
        self.line(
            f"    termination {out.get('termination')} after {out.get('steps')} steps · "
            f"best iteration {out.get('best_iteration')} · final score {out.get('final_score')}"
        )

    def show_clarify(self, out: dict[str, Any]) -> None:
        self.line(f"    question: {out.get('question')}")
        for option in out.get("options") or []:
            self.line(f"      ( ) {option}")

    def show_assess(self, out: dict[str, Any]) -> None:
        tool = out.get("tool_call")
        self.line(
            f"    confidence {out.get('confidence')}/10 · tool {tool or '—'}"
            + (f" {json.dumps(out.get('tool_params') or {})}" if tool else "")
        )
        if out.get("needs_more_context"):
            self.line(f"    needs more context: {', '.join(out['needs_more_context'])}")
        self.line(f"    draft: {self.cut(out.get('response'))}")

    show_synthesize = show_assess

    def show_respond(self, out: dict[str, Any]) -> None:
        tool = out.get("tool_call")
        if tool:
            self.line(f"    tool {tool} {json.dumps(out.get('tool_params') or {})}")
        self.line(f"    draft: {self.cut(out.get('response'))}")

    def show_critique(self, out: dict[str, Any]) -> None:
        self.line(f"    {out.get('decision')}: {self.cut(out.get('reasoning'))}")

    def show_tool_not_run(self, out: dict[str, Any]) -> None:
        self.line(
            f"    guards: {out.get('verdict')} {out.get('tool')} "
            f"{json.dumps(out.get('params') or {})} ({out.get('reason') or 'allowed'}) — "
            "not run: tools never run in the playground"
        )


class Command(BaseCommand):
    help = (
        "Run one reasoning turn outside any conversation (nothing is sent to a customer, no tool "
        "runs, usage is recorded as `playground`) and print each step as it happens."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question", help="The customer's question")
        parser.add_argument("--client", required=True, help="The client's slug")
        parser.add_argument(
            "--mode",
            help="standard, adaptive or deliberative (default: the mode the client's plan runs)",
        )
        parser.add_argument(
            "--iterations",
            type=int,
            help="Refinement iterations of a deliberative run (default: the plan's setting)",
        )
        parser.add_argument(
            "--rubric", default="", help="Rubric slug for a deliberative run (e.g. contemplative)"
        )
        parser.add_argument(
            "--conversation", help="Read this conversation's recent messages as the history"
        )
        parser.add_argument(
            "--step-by-step",
            action="store_true",
            help="Print every step in full and, on a terminal, wait for Enter after each",
        )
        parser.add_argument(
            "--json", action="store_true", help="Print the run's trace as JSON at the end"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        client = Client.objects.select_related("plan").filter(slug=options["client"]).first()
        if client is None:
            known = ", ".join(Client.objects.order_by("slug").values_list("slug", flat=True)[:20])
            raise CommandError(f"No client with slug {options['client']!r} (known: {known}).")
        mode = options["mode"] or mode_that_runs(client.plan.ai_mode)
        if mode not in playground_modes():
            raise CommandError(
                f"Mode {mode!r} cannot run; choose one of {', '.join(playground_modes())}."
            )
        conversation = None
        if options["conversation"]:
            conversation = conversation_get(client=client, public_id=options["conversation"])
            if conversation is None:
                raise CommandError(f"{client.slug} has no conversation {options['conversation']}.")
        try:
            run = playground_run_create(
                client=client,
                question=options["question"],
                mode=mode,
                conversation=conversation,
                rubric=options["rubric"],
                iterations=options["iterations"],
                source=RunSource.CLI,
                enqueue=False,
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None

        as_json = options["json"]
        # With --json, stdout carries only the JSON; the live steps go to stderr.
        live = self.stderr if as_json else self.stdout
        printer = StepPrinter(
            live,
            full=options["step_by_step"],
            pause=options["step_by_step"],
            run=run,
        )
        printer.line(
            f"Run {run.public_id} · client {client.slug} · mode {mode}"
            + (" · offline demo model" if not _has_key() else "")
        )
        printer.line(f"Question: {run.question}")
        with tenant_scope(run.client_id):
            finished = playground_run_execute(run_id=run.pk, listeners=[printer])
        run = finished or PlaygroundRun.objects.filter(client_id=run.client_id).get(pk=run.pk)
        steps = list(run.steps.order_by("index"))
        if as_json:
            self.stdout.write(json.dumps(run_json(run, steps=steps), indent=2, ensure_ascii=False))
        else:
            self._summary(printer, run)
        if run.status == RunStatus.FAILED:
            raise CommandError(f"The run failed: {run.error}")

    def _summary(self, printer: StepPrinter, run: PlaygroundRun) -> None:
        printer.line("")
        for reply in (run.final or {}).get("replies") or []:
            printer.line(f"Answer: {reply.get('text')}")
        escalate = (run.final or {}).get("escalate")
        if escalate:
            printer.line(f"Would hand over to a person: {escalate[0]} — {escalate[1]}")
        printer.line(
            f"Status {run.status} · {run.llm_calls} LLM calls · "
            f"{run.prompt_tokens + run.completion_tokens} tokens "
            f"({run.prompt_tokens} prompt + {run.completion_tokens} completion) · "
            f"cost ${run.cost_usd:.6f} (billed ${run.billed_usd:.6f}) · model {run.model}"
        )


def _has_key() -> bool:
    from django.conf import settings

    return bool(settings.OPENAI_API_KEY)
