"""Simulation fixtures: the reasoning shop (tests/reasoning/conftest.py) with its real
OpenAI-compatible server and webhook server, cases made as data, and helpers that run a whole
simulation in the test's thread and count what must never be written."""

from __future__ import annotations

import importlib
from typing import Any

from apps.core.tenancy import tenant_scope
from apps.simulations import services
from apps.simulations.models import SimCase, SimulationRun
from tests.reasoning.conftest import (  # noqa: F401  (fixtures, re-exported)
    chat,
    conversation,
    llm,
    llm_server,
    shop,
    standard_shop,
    webhook,
    webhook_server,
)

UNSCOPED = "test checks the database directly"


def make_case(client: Any, name: str, **fields: Any) -> SimCase:
    return SimCase.objects.create(client=client, name=name, **fields)


def run_now(client: Any, **kwargs: Any) -> SimulationRun:
    """Create a run and execute it in this thread; returns it refreshed."""
    kwargs.setdefault("source", "cli")
    kwargs.setdefault("selection", {})
    run = services.simulation_run_create(client=client, enqueue=False, **kwargs)
    with tenant_scope(client.pk):
        services.simulation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def live_rows() -> dict[str, int]:
    """What a simulation must never write: customer-facing and live-data rows."""
    names = {
        "conversations.Conversation",
        "conversations.Message",
        "tools.PendingAction",
        "tools.ToolExecution",
        "escalations.Escalation",
        "notes.Note",
    }
    apps = importlib.import_module("django.apps").apps
    return {name: apps.get_model(name).objects.unscoped(UNSCOPED).count() for name in sorted(names)}
