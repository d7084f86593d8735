"""Playground fixtures: the reasoning shop (tests/reasoning/conftest.py) with its real OpenAI-
compatible server and webhook server."""

from tests.reasoning.conftest import (  # noqa: F401  (fixtures, re-exported)
    conversation,
    llm,
    llm_server,
    shop,
    standard_shop,
    webhook,
    webhook_server,
)
