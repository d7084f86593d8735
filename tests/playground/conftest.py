"""Playground fixtures: the console's signed-in staff per role (the shop, its real OpenAI-
compatible server and webhook server come from tests/support/shop.py)."""

from tests.console.conftest import agent, browser_for, viewer  # noqa: F401  (fixtures)
