"""Playground fixtures: the console's signed-in staff per role (the shop, its real OpenAI-
compatible server and webhook server come from tests/support/shop.py), and the `reason` command
run as staff run it."""

from __future__ import annotations

import io

from django.core.management import call_command

from tests.console.conftest import agent, browser_for, viewer  # noqa: F401  (fixtures)


def reason(*args: str) -> str:
    """What `manage.py reason` with `args` prints on stdout (stderr, where --json sends the live
    steps, is dropped)."""
    out = io.StringIO()
    call_command("reason", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()
