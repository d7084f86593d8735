"""The sandbox a simulated conversation runs in: the playground's dry run, carried over many
turns.

Each customer message goes through the real pipeline (`Turn`, the mode runner, the post-draft
hooks, the guards) with three differences, all in memory:

- the conversation is unsaved `Conversation` / `Message` objects: its history grows with each
  customer message and each reply, and nothing is posted;
- an open confirmation question is an unsaved `PendingAction`, settled by each new customer
  message with the live turns' own pure rule (`guards.confirmation_decision` on an
  `OpenQuestion`): a destructive tool runs only after a later message confirmed its exact params;
- a tool the guards let run is answered by the case's stub (or, in a replay, by the result the
  original conversation recorded) and journalled as would-run (`tool` step with
  `sandbox: true`); the real compose path then writes the reply from it. No webhook is called.

Only the turn's `ReasoningTrace` (kind `simulation`), its steps and the usage records (purpose
`simulation`) are written."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.utils import timezone

from apps.billing.models import UsagePurpose
from apps.clients.models import Client, Plan
from apps.conversations.models import Conversation, Kind, Message, Role
from apps.escalations.services import HANDOFF_TEXT
from apps.reasoning import guards
from apps.reasoning.llm import model_override
from apps.reasoning.meter import Meter
from apps.reasoning.models import ReasoningStep, ReasoningTrace, TraceKind
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.run import (
    ChosenTurn,
    Failure,
    TurnResult,
    budget_reached_message,
    run_turn,
    trace_finish,
)
from apps.reasoning.traces import TraceOwner, TurnAborted, TurnRecorder
from apps.reasoning.turn import Outcome, Turn
from apps.simulations.config import Side
from apps.simulations.models import CaseRun, SimulationRun
from apps.tools.models import (
    ClientTool,
    ExecutionStatus,
    FailureKind,
    PendingAction,
    PendingActionStatus,
    ToolExecution,
)
from apps.tools.pending import OpenQuestion, StructuredAnswer

__all__ = [
    "BudgetExhausted",
    "Conversation",
    "RunStopped",
    "Sandbox",
    "SandboxConversation",
    "SimulationOwner",
    "budget_reached_message",
    "sandbox_turn",
    "stub_answer",
]

MAX_NOTES_PER_TURN = 50
_FAILURE_KINDS = {k.value for k in FailureKind} - {""}


class RunStopped(Exception):
    """Staff stopped the run: the case ends where it is."""


class BudgetExhausted(Exception):
    """The client's simulation budget ran out: the run ends with an error."""


class NotesOwner(TraceOwner, Protocol):
    """A sandboxed trace's owner: it keeps each turn's internal notes in memory."""

    notes: list[dict[str, Any]]


class SimulationOwner:
    """A case run as its traces' owner (`apps.reasoning.traces.TraceOwner`): the run's stop flag
    in place of a takeover; internal notes are kept per turn in memory (the guards' verdicts
    feed the transcript) and never posted."""

    def __init__(self, run: SimulationRun) -> None:
        self.run = run
        self.notes: list[dict[str, Any]] = []

    def ensure_open(self, recorder: TurnRecorder) -> None:
        if (
            SimulationRun.objects.for_client(self.run.client)
            .filter(pk=self.run.pk, stop_requested=True)
            .exists()
        ):
            recorder.step("stopped", output={"reason": "the simulation run was stopped"})
            raise TurnAborted()

    def internal(self, kind: str, text: str, data: dict[str, Any]) -> dict[str, Any]:
        note = {"kind": kind, "text": text[:2000], "data": data}
        if len(self.notes) < MAX_NOTES_PER_TURN:
            self.notes.append(note)
        return note

    def step_recorded(self, step: ReasoningStep) -> None:
        return None


def _subset(when: Any, params: dict[str, Any]) -> bool:
    return isinstance(when, dict) and all(params.get(k) == v for k, v in when.items())


def stub_answer(stubs: dict[str, Any], name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The case's stub for this call ({"ok", "result", "error"}), or None when it has none. A
    list is tried in order: the first entry whose `when` is a subset of the params wins; an
    entry without `when` is the default."""
    stub = stubs.get(name)
    entries = stub if isinstance(stub, list) else [stub] if isinstance(stub, dict) else []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if "when" in entry and not _subset(entry["when"], params):
            continue
        return entry
    return None


@dataclass
class _Question:
    pending: PendingAction
    qid: int
    proposed_turn: int
    shown: bool = False


@dataclass
class Sandbox:
    """The turn's effects (`apps.reasoning.turn.TurnEffects`), kept in memory for one case.

    `stubs`: the case's tool stubs. `recorded`: a replay's original tool results
    [{"name", "params_hash", "ok", "result", "error", "failure_kind"}]."""

    stubs: dict[str, Any] = field(default_factory=dict)
    recorded: list[dict[str, Any]] | None = None
    index: int = 0  # the current turn
    questions: list[_Question] = field(default_factory=list)
    ran: list[dict[str, Any]] = field(default_factory=list)  # this turn's would-run calls
    proposed: list[dict[str, Any]] = field(default_factory=list)
    _next_id: int = 1

    def begin(self, index: int) -> None:
        self.index = index
        self.ran, self.proposed = [], []

    # -- confirmation questions ----------------------------------------------------------------
    def settle(
        self, text: str, confirm: StructuredAnswer | None = None
    ) -> tuple[PendingAction | None, PendingAction | None]:
        """The live rule, on the in-memory questions: (confirmed, declined) by this message
        (`confirm`: a Yes/No button press naming a question's id and digest, as in the widget;
        simulated customers type, so their turns pass none)."""
        confirmed = declined = None
        for question in sorted(self.questions, key=lambda q: -q.qid):
            pending = question.pending
            if pending.status != PendingActionStatus.PENDING:
                continue
            facts = OpenQuestion(
                params=pending.params,
                shown_before=question.shown and question.proposed_turn < self.index,
                expired=False,  # simulated time does not pass
                first_reply=question.proposed_turn == self.index - 1,
                another_confirmed=confirmed is not None,
                action_id=question.qid,
                digest=guards.params_digest(pending.params),
                structured=confirm,
                tool=pending.tool.name,
            )
            status = guards.confirmation_decision(facts, text)
            if status == PendingActionStatus.PENDING:
                continue
            pending.status = status
            if status == PendingActionStatus.CONFIRMED:
                confirmed = pending
            elif status == PendingActionStatus.DECLINED and declined is None:
                declined = pending
        return confirmed, declined

    def propose(self, turn: Turn, *, tool: ClientTool, params: dict[str, Any]) -> int:
        for question in self.questions:
            if question.pending.status in (
                PendingActionStatus.PENDING,
                PendingActionStatus.CONFIRMED,
            ):
                question.pending.status = PendingActionStatus.SUPERSEDED
        qid = self._next_id
        self._next_id += 1
        pending = PendingAction(
            client=turn.client,
            tool=tool,
            params=params,
            params_hash=guards.params_hash(params),
            idempotency_key=f"sim-{turn.rec.trace.pk}-{qid}",
            status=PendingActionStatus.PENDING,
        )
        self.questions.append(_Question(pending=pending, qid=qid, proposed_turn=self.index))
        self.proposed.append({"name": tool.name, "params": params})
        return qid

    def shown(self, qids: list[int]) -> None:
        """The turn's confirmation questions that reached the (simulated) customer."""
        for question in self.questions:
            if question.qid in qids:
                question.shown = True

    # -- tools ---------------------------------------------------------------------------------
    def execute(
        self,
        turn: Turn,
        *,
        tool: ClientTool,
        params: dict[str, Any],
        pending: PendingAction | None,
    ) -> ToolExecution:
        answer, stubbed = self.answer(tool, params)
        ok = bool(answer.get("ok", True))
        failure = str(answer.get("failure_kind") or "")
        execution = ToolExecution(
            client=turn.client,
            tool=tool,
            params=params,
            status=ExecutionStatus.SUCCEEDED if ok else ExecutionStatus.FAILED,
            result=answer.get("result", {}) if ok else {},
            error="" if ok else str(answer.get("error") or "failed"),
            failure_kind=(
                FailureKind.NONE
                if ok
                else failure
                if failure in _FAILURE_KINDS
                else FailureKind.REFUSED
            ),
            attempts=1,
            latency_ms=0,
        )
        self.ran.append(
            {
                "name": tool.name,
                "params": params,
                "ok": ok,
                "result": execution.result,
                "error": execution.error,
                "stubbed": stubbed,
            }
        )
        return execution

    def answer(self, tool: ClientTool, params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """What the call answers (`ok`, `result`, `error`, `failure_kind`) and whether it was
        stubbed: the recorded answer a replay repeats, else the case's stub, else a bare ok."""
        name = tool.name
        if self.recorded is not None:
            phash = guards.params_hash(params)
            for item in self.recorded:
                if item["name"] == name and item["params_hash"] == phash:
                    return item, True
        stub = stub_answer(self.stubs, name, params)
        if stub is not None:
            return stub, True
        return {"ok": True, "result": {}}, False

    def executed(self, turn: Turn, *, pending: PendingAction) -> None:
        pending.status = PendingActionStatus.EXECUTED


# The verified customer a simulated conversation has unless its case is tagged `anonymous`.
SANDBOX_CUSTOMER = "sandbox-customer"
ANONYMOUS_TAG = "anonymous"


def case_customer(case: Any) -> str | None:
    """The simulated customer of a case: the verified sandbox customer, or None (anonymous)
    when the case is tagged `anonymous`."""
    return None if ANONYMOUS_TAG in (case.tags or []) else SANDBOX_CUSTOMER


@dataclass
class SandboxConversation:
    """The in-memory conversation: unsaved rows the modes read, never written."""

    conversation: Conversation
    messages: list[Message] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        *,
        client: Any,
        history: list[dict[str, Any]],
        customer: Conversation | str | None = SANDBOX_CUSTOMER,
    ) -> SandboxConversation:
        """`customer`: who the simulated customer is — by default a verified sandbox customer
        (so `customer_scoped` tools run as they would for a signed-in customer); None: an
        anonymous visitor (a case tagged `anonymous`); a conversation: its customer, as it was
        (a replay)."""
        conversation = Conversation(client=client, language=client.language or "en")
        if isinstance(customer, Conversation):
            for name in ("customer_id", "customer_email", "customer_name"):
                setattr(conversation, name, getattr(customer, name))
            conversation.customer_verified_via = customer.customer_verified_via
            conversation.customer_verified_at = customer.customer_verified_at
        elif customer:
            conversation.customer_id = customer
            conversation.customer_verified_at = timezone.now()
        conv = cls(conversation=conversation)
        for item in history or []:
            role = Role.USER if item.get("role") == "user" else Role.ASSISTANT
            conv.add(role, str(item.get("text", "")))
        return conv

    def add(self, role: str, text: str, kind: str = Kind.TEXT) -> Message:
        self.conversation.last_seq += 1
        message = Message(
            client=self.conversation.client,
            conversation=self.conversation,
            role=role,
            kind=kind,
            text=text,
            seq=self.conversation.last_seq,
        )
        self.messages.append(message)
        return message

    def recent(self) -> list[Message]:
        return self.messages[-int(settings.REASONING_HISTORY_MESSAGES) :]


def _asked(trace: ReasoningTrace, outcome: Outcome, notes: list[dict[str, Any]]) -> bool:
    """A clarifying question: a guard `ask`, a critique ASK_USER or a clarify step (a
    confirmation question does not count)."""
    if any(r.kind == Kind.CLARIFICATION for r in outcome.replies):
        return True
    if any(n["kind"] == Kind.GUARD and n["data"].get("action") == "ask" for n in notes):
        return True
    for name, output in trace.steps.values_list("name", "output"):
        if name == "clarify":
            return True
        if name == "critique" and isinstance(output, dict) and output.get("decision") == "ASK_USER":
            return True
    return False


def sandbox_turn(
    *,
    case_run: CaseRun,
    side: Side,
    sandbox: Sandbox,
    conv: SandboxConversation,
    owner: SimulationOwner,
    tools: list[ClientTool],
    index: int,
    text: str,
) -> dict[str, Any]:
    """One customer message through the real pipeline (`run_turn`) in the sandbox; returns its
    transcript entry. Raises `RunStopped` (staff pressed stop) and `BudgetExhausted` (the
    simulation budget) after closing the turn's trace."""
    started = time.perf_counter()
    turn = begin_sandbox_turn(
        client=side.client,
        plan=side.plan,
        case_run=case_run,
        sandbox=sandbox,
        conv=conv,
        owner=owner,
        tools=tools,
        index=index,
        text=text,
        notes_reader=side.notes_reader(conv.conversation.language),
        # The candidate's rubric and refinement rounds (deliberative mode reads them).
        rubric_name=side.rubric,
        refinement_iterations=side.refinement_iterations,
    )
    with model_override(side.model):
        result = run_turn(turn, deadline=settings.REASONING_TURN_DEADLINE_SECONDS)
    outcome, recorder = result.outcome, turn.rec
    replies = _replies(sandbox, conv, recorder, outcome)
    duration = trace_finish(
        recorder,
        status=result.status,
        started=started,
        error=result.error,
        escalated=outcome.escalate is not None,
        model=side.config.get("model", ""),
    )
    entry = _entry(turn, result, owner, sandbox, index=index, replies=replies, duration=duration)
    stop = (
        RunStopped(entry)
        if result.failure == Failure.ABORTED
        else BudgetExhausted(entry)
        if result.failure == Failure.USAGE_LIMIT
        else None
    )
    if stop is not None:
        raise stop
    return entry


def begin_sandbox_turn(
    *,
    client: Client,
    plan: Plan,
    case_run: CaseRun,
    sandbox: Sandbox,
    conv: SandboxConversation,
    owner: NotesOwner,
    tools: list[ClientTool],
    index: int,
    text: str,
    notes_reader: Callable[[], tuple[str, list[int]]] | None,
    rubric_name: str = "",
    refinement_iterations: int | None = None,
) -> ChosenTurn:
    """The turn of one customer message in a sandbox (a simulation's, the certificate's): its
    trace (kind `simulation`), its recorder, and the in-memory questions this message settles."""
    mode = mode_that_runs(plan.ai_mode)
    trace = ReasoningTrace.objects.create(
        client_id=client.pk, kind=TraceKind.SIMULATION, case_run=case_run, mode=mode
    )
    # Not linked to the trace: billing counts a usage record with a trace as a customer turn
    # (the plan's included turns, the monthly turn budget); a simulation's calls are usage only,
    # reported on their own line (`group_by=purpose`).
    meter = Meter(client=client, mode=mode, purpose=UsagePurpose.SIMULATION)
    owner.notes = []
    recorder = TurnRecorder(
        trace=trace,
        client=client,
        conversation=conv.conversation,
        next_index=0,
        owner=owner,
        meter=meter,
    )
    sandbox.begin(index)
    message = conv.add(Role.USER, text)
    turn = ChosenTurn(
        client=client,
        plan=plan,
        conversation=conv.conversation,
        user_message=message,
        rec=recorder,
        tools=tools,
        history=conv.recent(),
        sandbox=sandbox,
        notes_reader=notes_reader,
        rubric_name=rubric_name,
        refinement_iterations=refinement_iterations,
    )
    turn.confirmed, turn.declined = sandbox.settle(text)
    settled = turn.confirmed or turn.declined
    if settled is not None:
        recorder.step(
            "confirmation",
            output={"tool": settled.tool.name, "params": settled.params, "status": settled.status},
        )
    return turn


def _replies(
    sandbox: Sandbox, conv: SandboxConversation, recorder: TurnRecorder, outcome: Outcome
) -> list[dict[str, Any]]:
    """The turn's replies as the simulated customer sees them (and the conversation grows by),
    the hand-off notice last when the turn escalated."""
    replies = [{"text": r.text, "kind": str(r.kind), "data": r.data} for r in outcome.replies]
    sandbox.shown(
        [
            int(r.data["pending_action"])
            for r in outcome.replies
            if r.kind == Kind.CONFIRMATION_REQUEST and r.data.get("pending_action")
        ]
    )
    for reply in outcome.replies:
        conv.add(Role.ASSISTANT, reply.text, kind=reply.kind)
    if outcome.escalate:
        reason, detail = outcome.escalate
        recorder.step("escalate", output={"reason": reason, "detail": detail, "sandbox": True})
        handoff = outcome.handoff_text or HANDOFF_TEXT
        replies.append({"text": handoff, "kind": str(Kind.HANDOFF), "data": {"reason": reason}})
    return replies


def _entry(
    turn: Turn,
    result: TurnResult,
    owner: SimulationOwner,
    sandbox: Sandbox,
    *,
    index: int,
    replies: list[dict[str, Any]],
    duration: int,
) -> dict[str, Any]:
    """The turn's transcript entry."""
    outcome, trace, meter = result.outcome, turn.rec.trace, turn.rec.meter
    refused = [
        {
            # An invented tool has no `tool`: its name is the one the model wrote.
            "name": n["data"].get("tool") or n["data"].get("requested_tool"),
            "params": n["data"].get("params", {}),
            "verdict": n["data"].get("action"),
            "reason": n["data"].get("reason", ""),
        }
        for n in owner.notes
        if n["kind"] == Kind.GUARD and n["data"].get("action") in ("refuse", "ask")
    ]
    return {
        "index": index,
        "customer": turn.user_message.text,
        "replies": replies,
        "reply": "\n".join(str(r["text"]) for r in replies),
        "tools_ran": list(sandbox.ran),
        "tools_proposed": list(sandbox.proposed),
        "tools_refused": refused,
        "asked": _asked(trace, outcome, owner.notes),
        "escalated": outcome.escalate is not None,
        "escalation_reason": outcome.escalate[0] if outcome.escalate else None,
        "evaluation": trace.evaluation_outcome or "",
        "confidence": outcome.confidence,
        "llm_calls": meter.calls,
        "prompt_tokens": trace.prompt_tokens,
        "completion_tokens": trace.completion_tokens,
        "cost_usd": str(meter.cost_usd),
        "offline": meter.offline,
        "latency_ms": duration,
        "trace": trace.pk,
        "error": result.error,
    }
