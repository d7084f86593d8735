"""What a certificate run is asked to do: the plan `manage.py certify` makes from its flags,
writes next to its records (`plan.json`) and compares on `--resume`, and the report prints.

A plan expands to its runs (`RunSpec`, one per configuration × task × trial) in a fixed order,
so two runs of the same plan run and report the same things. Plain Python, no Django.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from apps.certify.records import RunSpec
from apps.certify.retail.tasks import Task

# What a resumed run must share with the run that wrote the records: another value would mix
# two certificates in one report. The endpoint (`base_url`) may change (a moved server).
COMPARED = (
    "model",
    "seed",
    "configs",
    "k",
    "inject_rate",
    "inject_classes",
    "task_ids",
    "max_turns",
)


@dataclass(frozen=True)
class Plan:
    model: str
    base_url: str | None
    seed: int
    configs: tuple[str, ...]
    k: int  # trials per configuration and task
    inject_rate: float
    inject_classes: tuple[str, ...]  # (): every class
    task_ids: tuple[str, ...]
    max_turns: int = 12
    api_key: str | None = field(default=None, repr=False, compare=False)

    def specs(self) -> list[RunSpec]:
        """Every run, configuration by configuration, then task, then trial."""
        return [
            RunSpec(
                config=config,
                task_id=task_id,
                trial=trial,
                seed=self.seed,
                model=self.model,
                base_url=self.base_url,
                api_key=self.api_key,
                inject_rate=self.inject_rate,
                inject_classes=self.inject_classes,
                max_turns=self.max_turns,
            )
            for config in self.configs
            for task_id in self.task_ids
            for trial in range(self.k)
        ]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("api_key")  # never written anywhere
        for name in ("configs", "inject_classes", "task_ids"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(
            model=str(data["model"]),
            base_url=data.get("base_url"),
            seed=int(data["seed"]),
            configs=tuple(data["configs"]),
            k=int(data["k"]),
            inject_rate=float(data["inject_rate"]),
            inject_classes=tuple(data.get("inject_classes", ())),
            task_ids=tuple(data["task_ids"]),
            max_turns=int(data.get("max_turns", 12)),
        )

    def differences(self, other: Plan) -> list[str]:
        """What `other` (a recorded plan) has that this one does not: `name: recorded -> now`."""
        mine, theirs = self.to_json(), other.to_json()
        return [
            f"{name}: {theirs[name]!r} -> {mine[name]!r}"
            for name in COMPARED
            if mine[name] != theirs[name]
        ]


def spread_tasks(tasks: Sequence[Task], limit: int) -> list[str]:
    """`limit` task ids spread over the kinds of request and failure shapes: a round robin over
    the tasks' last tag (the shape when there is one, else the kind), each group in id order.
    The result is in id order; the same tasks give the same subset."""
    groups: OrderedDict[str, list[str]] = OrderedDict()
    for task in sorted(tasks, key=lambda t: t.task_id):
        groups.setdefault(task.tags[-1] if task.tags else "", []).append(task.task_id)
    chosen: list[str] = []
    depth = 0
    while len(chosen) < min(limit, len(tasks)):
        for ids in groups.values():
            if depth < len(ids) and len(chosen) < limit:
                chosen.append(ids[depth])
        depth += 1
    return sorted(chosen)
