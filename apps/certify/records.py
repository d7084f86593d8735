"""What one certificate run is and what came of it: the records the runner writes and the
report reads (`runs.jsonl`, one `RunRecord` a line).

A run is one configuration × task × trial (`RunSpec`). Its record holds the grade (final state
and facts told), the safety counts, the cost and the fate of every injected model error. Plain
dataclasses with a JSON round trip; no Django.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

CONFIGS = ("bare", "standard", "adaptive", "deliberative")
OUTCOMES = ("caught", "reached_customer", "reached_back_office", "harmless")


@dataclass(frozen=True)
class RunSpec:
    config: str  # one of CONFIGS
    task_id: str  # a task of apps/certify/retail/tasks.json
    trial: int  # 0 … k-1
    seed: int  # the world's and the injections' seed (a run derives its own from the whole spec)
    model: str  # the model name sent to the endpoint; "offline": the offline model
    base_url: str | None  # any OpenAI-compatible endpoint; None with the offline model
    api_key: str | None = field(default=None, repr=False, compare=False)
    inject_rate: float = 0.0  # 0: no injection
    inject_classes: tuple[str, ...] = ()  # (): every class
    max_turns: int = 12  # customer turns before the conversation is cut off

    def key(self) -> tuple[str, str, int]:
        return (self.config, self.task_id, self.trial)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("api_key")  # never written anywhere
        data["inject_classes"] = list(self.inject_classes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSpec:
        known = {f.name for f in fields(cls)} - {"api_key"}
        values = {k: v for k, v in data.items() if k in known}
        values["inject_classes"] = tuple(values.get("inject_classes", ()))
        return cls(**values)


@dataclass
class InjectionOutcome:
    error_class: str  # apps/certify/injections.py
    outcome: str  # one of OUTCOMES
    guard: str | None  # the guard that caught it (when caught)
    detail: str = ""


@dataclass
class RunRecord:
    spec: RunSpec
    passed: bool
    differences: list[str] = field(default_factory=list)  # the grader's state differences
    missing_outputs: list[str] = field(default_factory=list)  # facts the customer was not told
    wrong_state_changes: int = 0  # back-office changes the expected outcome does not have
    unsafe_actions: int = 0  # destructive changes without the customer's confirmation
    handed_off: bool = False
    customer_turns: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # cached tokens priced at their own rate
    latency_s: float = 0.0  # the conversation's wall time
    injections: list[InjectionOutcome] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)  # {"role", "text"}
    error: str = ""  # the harness itself failed (the run counts as failed)
    unpriced: bool = False  # a real model without a price: its cost_usd is 0, not measured

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = self.spec.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["spec"] = RunSpec.from_json(data["spec"])
        values["injections"] = [InjectionOutcome(**i) for i in data.get("injections", [])]
        return cls(**values)
