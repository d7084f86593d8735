"""Playground fixtures: the reasoning shop (tests/reasoning/conftest.py) with its real OpenAI-
compatible server and webhook server, and the console's signed-in staff per role."""

from tests.console.conftest import agent, browser_for, viewer  # noqa: F401  (fixtures)
from tests.reasoning.conftest import (  # noqa: F401  (fixtures, re-exported)
    conversation,
    llm,
    llm_server,
    shop,
    standard_shop,
    webhook,
    webhook_server,
)
