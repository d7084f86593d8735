"""Simulation fixtures: the reasoning shop (tests/support/shop.py) with its real
OpenAI-compatible server and webhook server, cases made as data, and helpers that run a whole
simulation in the test's thread and count what must never be written."""

from __future__ import annotations

import importlib
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from apps.clients.models import Client
from apps.core.tenancy import tenant_scope
from apps.simulations import services
from apps.simulations.models import SimCase, SimulationRun
from tests.conftest import DEMO_TENANT

UNSCOPED = "test checks the database directly"
DEMO_CASES = Path(DEMO_TENANT).parent / "simulations" / "demo.json"


@pytest.fixture
def demo(settings) -> Client:
    """The demo tenant with its simulation suite, loaded as `make demo` does, answered by the
    offline demo model (as `make simulate` and the README's commands run it)."""
    settings.OPENAI_API_KEY = ""
    call_command(
        "demo_setup",
        "--tenant",
        str(DEMO_TENANT),
        "--simulations",
        str(DEMO_CASES),
        stdout=StringIO(),
    )
    return Client.objects.get(slug="trailhead")


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
