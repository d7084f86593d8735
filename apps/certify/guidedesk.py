"""GuideDesk as the certificate's agent: a throwaway client on a plan in the configuration's
mode (standard, adaptive, deliberative), its eight tools imported from `tenant_file(...)` as
webhook tools of the run's retail server, and each customer message run through the real turn
pipeline (`run_turn`, in-process).

It reuses the simulations' sandbox (apps/simulations/sandbox.py): the in-memory conversation,
the live confirmation rule on in-memory questions, the guards as in a live turn. The one
difference is `BackOffice.answer`: a call the guards let run goes to the tool's real webhook
executor (`run_webhook`), so it changes the served world exactly as a live turn would.

The model: a real one behind the injecting proxy (`OPENAI_BASE_URL` = the proxy). Offline, the
bare agent's rule-based brain (`apps.certify.naive.step_answer`) answers GuideDesk's steps
in-process, from the conversation as this harness saw it (the customer's messages, the tools
GuideDesk ran with their results, GuideDesk's replies), so both columns share one model; its
answers get the proxy's seeded draw and rewrite in-process (`InjectingProxy.rewrite_in_process`).
The deliberative loop's own reasoning steps, which the rules do not decide, keep the offline
demo model's answers. Everything the run wrote to the database is deleted with
the client at the end.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import transaction
from django.test.utils import override_settings

from apps.billing.models import UsageRecord
from apps.certify.customer import ScriptedCustomer
from apps.certify.naive import NaiveAgent, step_answer
from apps.certify.proxy import InjectingProxy
from apps.certify.retail.server import RetailServer, tenant_file
from apps.certify.retail.tools import TOOLS
from apps.certify.session import Session
from apps.clients.models import Client
from apps.conversations.models import Kind, Role
from apps.escalations.services import HANDOFF_TEXT
from apps.provisioning.services import tenant_import
from apps.reasoning import steps as step_registry
from apps.reasoning.llm import model_override
from apps.reasoning.llm import offline as offline_model
from apps.reasoning.models import ReasoningStep
from apps.reasoning.run import run_turn, trace_finish
from apps.reasoning.traces import TurnRecorder
from apps.simulations.models import CaseRun, SimulationRun
from apps.simulations.sandbox import Sandbox, SandboxConversation, begin_sandbox_turn
from apps.tools.executors.webhook import run_webhook
from apps.tools.models import ClientTool, FailureKind

DESTRUCTIVE = frozenset(name for name, spec in TOOLS.items() if spec.destructive)
_offline_lock = threading.Lock()


class CertifyOwner:
    """The traces' owner (`apps.reasoning.traces.TraceOwner`): nothing stops a run; the
    internal notes (the guards' verdicts) are kept per turn in memory."""

    def __init__(self) -> None:
        self.notes: list[dict[str, Any]] = []

    def ensure_open(self, recorder: TurnRecorder) -> None:
        return None

    def internal(self, kind: str, text: str, data: dict[str, Any]) -> dict[str, Any]:
        note = {"kind": kind, "text": text[:2000], "data": data}
        self.notes.append(note)
        return note

    def step_recorded(self, step: ReasoningStep) -> None:
        return None


class BackOffice(Sandbox):
    """The sandbox, but a call the guards let run goes to the real webhook (its answer is the
    webhook's, never a stub)."""

    def __init__(self, session: Session, conversation_id: str) -> None:
        super().__init__()
        self.session = session
        self.conversation_id = conversation_id

    def answer(self, tool: ClientTool, params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        key = f"certify-{self.conversation_id}-{len(self.session.executions)}"

        def call() -> dict[str, Any]:
            outcome = run_webhook(
                tool=tool, params=params, conversation_id=self.conversation_id, idempotency_key=key
            )
            return {
                "ok": outcome.ok,
                "result": outcome.result or {},
                "error": outcome.error,
                "code": outcome.error_code,
                "refused": outcome.refused,
                "timed_out": outcome.timed_out,
            }

        reply = self.session.executed(self.index, tool.name, params, call)
        ok = bool(reply["ok"])
        failure = (
            FailureKind.NONE
            if ok
            else FailureKind.REFUSED
            if reply["refused"]
            else FailureKind.TIMED_OUT
            if reply["timed_out"]
            else FailureKind.ERROR
        )
        if tool.name == "transfer_to_human_agents" and ok:
            self.session.handed_off = True
        return {**reply, "failure_kind": failure}, False


def conversation(session: Session) -> list[dict[str, Any]]:
    """The conversation so far in OpenAI's shape, as the naive agent reads it: per customer
    turn its message, the tools run (a call and its result) and the agent's reply."""
    messages: list[dict[str, Any]] = []
    turns = sorted({t["turn"] for t in session.transcript} | {e.turn for e in session.executions})
    for turn in turns:
        entries = [t for t in session.transcript if t["turn"] == turn]
        messages += [
            {"role": "user", "content": t["text"]} for t in entries if t["role"] == "customer"
        ]
        for number, done in enumerate(e for e in session.executions if e.turn == turn):
            call_id = f"call_{turn}_{number}"
            arguments = json.dumps(done.params)
            function = {"name": done.name, "arguments": arguments}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                }
            )
            reply = json.dumps(done.reply, sort_keys=True, default=str)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": reply})
        messages += [
            {"role": "assistant", "content": t["text"]}
            for t in entries
            if t["role"] == "agent" and t["text"]
        ]
    return messages


@contextlib.contextmanager
def offline_injection(proxy: InjectingProxy, session: Session, turn: list[int]) -> Iterator[None]:
    """The naive agent's answers (the demo model's for the steps it does not decide) through
    the proxy's draw and rewrites, in-process."""
    original = offline_model.offline_complete
    agent = NaiveAgent()

    def complete(step: str, messages: list[dict[str, str]], hint: dict[str, Any]) -> str:
        schema = step_registry.get(step).output.model_json_schema()
        answer = step_answer(agent, step, conversation(session), hint, schema)
        raw = original(step, messages, hint) if answer is None else json.dumps(answer)
        names = [str(t.get("name")) for t in hint.get("tools", []) if isinstance(t, dict)]
        request: dict[str, Any] = {
            "messages": list(messages),
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": step,
                    "schema": {"properties": {"tool_call": {"enum": names}}},
                },
            },
        }
        seen = len(proxy.injections)
        message, _ = proxy.rewrite_in_process(
            {"role": "assistant", "content": raw}, request, step=step
        )
        session.injected(turn[0], proxy.injections[seen:])
        return str(message.get("content") or "")

    with _offline_lock:
        offline_model.offline_complete = complete
        try:
            yield
        finally:
            offline_model.offline_complete = original


def _import_client(server: RetailServer, mode: str) -> Client:
    suffix = uuid.uuid4().hex[:10]
    document = tenant_file(
        webhook_url=server.webhook_url,
        webhook_secret=server.webhook_secret,
        slug=f"certify-{suffix}",
    )
    plan = document["plans"][0]
    plan["slug"] = f"certify-{suffix}"
    plan["ai_mode"] = mode
    document["clients"][0]["plan"] = plan["slug"]
    [imported] = tenant_import(data=document)
    return Client.objects.get(slug=imported.slug)


def _model_settings(model: str, base_url: str | None, api_key: str | None) -> dict[str, Any]:
    if model == "offline":
        return {"OPENAI_API_KEY": ""}
    return {"OPENAI_API_KEY": api_key or "certify", "OPENAI_BASE_URL": base_url}


def run_guidedesk(
    *,
    session: Session,
    server: RetailServer,
    proxy: InjectingProxy,
    customer: ScriptedCustomer,
    mode: str,
    model: str,
    api_key: str | None,
) -> dict[str, Any]:
    """The whole conversation through GuideDesk's pipeline, recorded in `session`; returns
    the usage the client's records hold (calls, tokens, cost)."""
    client = _import_client(server, mode)
    try:
        return _converse(session, server, proxy, customer, client, model, api_key)
    finally:
        _delete(client)


def _converse(
    session: Session,
    server: RetailServer,
    proxy: InjectingProxy,
    customer: ScriptedCustomer,
    client: Client,
    model: str,
    api_key: str | None,
) -> dict[str, Any]:
    tools = list(ClientTool.objects.unscoped("certify: the run's own client").filter(client=client))
    run = SimulationRun.objects.create(client=client, name="certificate", compare=False)
    case_run = CaseRun.objects.create(
        client=client, run=run, case_name="certificate", side="candidate"
    )
    conv = SandboxConversation.start(client=client, history=[], customer=None)
    office = BackOffice(session, conversation_id=f"cert-{case_run.pk}")
    owner = CertifyOwner()
    current = [0]
    offline = model == "offline"
    injecting = offline_injection(proxy, session, current) if offline else contextlib.nullcontext()
    with (
        override_settings(**_model_settings(model, proxy.base_url, api_key)),
        model_override("" if offline else model),
        injecting,
    ):
        text = customer.opening()
        for index in range(session.max_turns):
            current[0] = index
            session.customer(index, text)
            seen = len(proxy.injections)
            visible = _one_turn(session, client, case_run, office, conv, owner, tools, index, text)
            if not offline:
                session.injected(index, proxy.injections[seen:])
            next_text = session.answered(index, visible, customer)
            if next_text is None:
                break
            text = next_text
    return _usage(client)


def _one_turn(
    session: Session,
    client: Client,
    case_run: CaseRun,
    office: BackOffice,
    conv: SandboxConversation,
    owner: CertifyOwner,
    tools: list[ClientTool],
    index: int,
    text: str,
) -> list[str]:
    started = time.perf_counter()
    turn = begin_sandbox_turn(
        client=client,
        plan=client.plan,
        case_run=case_run,
        sandbox=office,
        conv=conv,
        owner=owner,
        tools=tools,
        index=index,
        text=text,
        notes_reader=lambda: ("", []),
    )
    result = run_turn(turn, deadline=settings.REASONING_TURN_DEADLINE_SECONDS)
    outcome, recorder = result.outcome, turn.rec
    office.shown(
        [
            int(r.data["pending_action"])
            for r in outcome.replies
            if r.kind == Kind.CONFIRMATION_REQUEST and r.data.get("pending_action")
        ]
    )
    visible = [str(r.text) for r in outcome.replies]
    for reply in outcome.replies:
        conv.add(Role.ASSISTANT, str(reply.text), kind=reply.kind)
    if outcome.escalate:
        session.handed_off = True
        visible.append(str(outcome.handoff_text or HANDOFF_TEXT))
    trace_finish(
        recorder,
        status=result.status,
        started=started,
        error=result.error,
        escalated=outcome.escalate is not None,
    )
    session.guards[index] = [dict(n["data"]) for n in owner.notes if n["kind"] == Kind.GUARD]
    session.steps[index] = [
        {"name": name, "output": output, "error": error}
        for name, output, error in ReasoningStep.objects.unscoped("certify: the run's trace")
        .filter(trace=recorder.trace)
        .order_by("index")
        .values_list("name", "output", "error")
    ]
    if result.error:
        session.steps[index].append({"name": "turn_error", "output": {}, "error": result.error})
    return visible


def _usage(client: Client) -> dict[str, Any]:
    records = list(
        UsageRecord.objects.unscoped("certify: the run's own client")
        .filter(client=client)
        .values_list("model", "prompt_tokens", "cached_tokens", "completion_tokens", "cost_usd")
    )
    return {
        "calls": len(records),
        "models": sorted({r[0] for r in records}),
        "prompt_tokens": sum(r[1] for r in records),
        "cached_tokens": sum(r[2] for r in records),
        "completion_tokens": sum(r[3] for r in records),
        "cost_usd": float(sum(r[4] for r in records)),
    }


def _delete(client: Client) -> None:
    """The run's client and everything it owns."""
    plan = client.plan
    with transaction.atomic():
        client.delete()
        if not Client.objects.filter(plan=plan).exists():
            plan.delete()
