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
from apps.playground.models import PlaygroundRun, RunSource, RunStatus
from apps.playground.selectors import run_json
from apps.playground.services import (
    playground_modes,
    playground_run_create,
    playground_run_execute,
)
from apps.reasoning.models import ReasoningStep
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.rendering import step_lines


class StepPrinter:
    """Prints each step as the run records it, as the step views say
    (apps/reasoning/rendering.py)."""

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

    def __call__(self, step: ReasoningStep) -> None:
        for line in step_lines(step, cut=self.cut):
            self.line(line)
        if self.pause and sys.stdin.isatty():
            answer = input("    — Enter for the next step, q to stop — ")
            if answer.strip().lower().startswith("q"):
                PlaygroundRun.objects.for_client(self.run.client).filter(pk=self.run.pk).update(
                    stop_requested=True
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
        run = finished or PlaygroundRun.objects.for_client(client).select_related("trace").get(
            pk=run.pk
        )
        steps = list(run.trace.steps.order_by("index"))
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
        trace = run.trace
        printer.line(
            f"Status {run.status} · {trace.llm_calls} LLM calls · "
            f"{trace.prompt_tokens + trace.completion_tokens} tokens "
            f"({trace.prompt_tokens} prompt + {trace.completion_tokens} completion) · "
            f"cost ${trace.cost_usd:.6f} (billed ${trace.billed_usd:.6f}) · model {trace.model}"
        )


def _has_key() -> bool:
    from django.conf import settings

    return bool(settings.OPENAI_API_KEY)
