"""What happened in one certificate conversation, as the agents report it to the runner: the
transcript, every tool call that reached the back office (and whether it changed the world),
the model calls and their tokens, the injections drawn per customer turn and, for GuideDesk,
the guards' verdicts. `apps.certify.run` grades and accounts from it.

Plain Python, no Django.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apps.certify.retail.server import RetailRuntime

if TYPE_CHECKING:
    from apps.certify.customer import ScriptedCustomer


@dataclass
class Executed:
    turn: int  # the customer message it answered (0-based)
    name: str
    params: dict[str, Any]
    ok: bool
    changed: bool  # the world's digest changed
    reply: dict[str, Any]


@dataclass
class Injected:
    turn: int
    entry: dict[str, Any]  # the proxy's log line


@dataclass
class Session:
    runtime: RetailRuntime
    max_turns: int
    transcript: list[dict[str, Any]] = field(default_factory=list)
    executions: list[Executed] = field(default_factory=list)
    injections: list[Injected] = field(default_factory=list)
    # Per customer turn: the guards' verdicts and the trace's step names (GuideDesk only).
    guards: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    steps: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    handed_off: bool = False
    customer_turns: int = 0

    def customer(self, turn: int, text: str, *, final: bool = False) -> None:
        self.transcript.append({"role": "customer", "text": text, "turn": turn})
        if not final:
            self.customer_turns += 1

    def agent(self, turn: int, text: str) -> None:
        self.transcript.append({"role": "agent", "text": text, "turn": turn})

    def answered(self, turn: int, visible: list[str], customer: ScriptedCustomer) -> str | None:
        """The agent's answer to `turn` (what the customer saw of it, one text a line) recorded
        and read by the customer: the customer's next message, or None when it said goodbye
        (recorded as its final message)."""
        agent = "\n".join(visible)
        self.agent(turn, agent)
        text = customer.reply(agent)
        if customer.finished:
            self.customer(turn + 1, text, final=True)
            return None
        return text

    def llm_call(self, *, prompt: int, completion: int, cached: int = 0) -> None:
        self.llm_calls += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cached_tokens += cached

    def injected(self, turn: int, entries: list[dict[str, Any]]) -> None:
        self.injections += [Injected(turn, e) for e in entries if e.get("applied")]

    def executed(
        self,
        turn: int,
        name: str,
        params: dict[str, Any] | str,
        run: Callable[[], dict[str, Any]],
    ) -> dict[str, Any]:
        """Run one back-office call (`run`), noting whether it changed the world."""
        before = self.runtime.snapshot().digest()
        reply = run()
        after = self.runtime.snapshot().digest()
        if isinstance(params, str):
            try:
                parsed = json.loads(params or "{}")
            except ValueError:
                parsed = {"_raw": params}
            params = parsed if isinstance(parsed, dict) else {"_raw": params}
        self.executions.append(
            Executed(turn, name, params, bool(reply.get("ok")), before != after, reply)
        )
        return reply

    def agent_texts(self, turn: int | None = None) -> list[str]:
        return [
            str(t["text"])
            for t in self.transcript
            if t["role"] == "agent" and (turn is None or t["turn"] == turn)
        ]

    def customer_text(self, turn: int) -> str:
        return next(
            (
                str(t["text"])
                for t in self.transcript
                if t["role"] == "customer" and t["turn"] == turn
            ),
            "",
        )
