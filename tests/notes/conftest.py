"""The reasoning suite's shop, scripted LLM server and webhook server, for notes in turns."""

from tests.reasoning.conftest import (  # noqa: F401 — fixtures
    chat,
    conversation,
    llm,
    llm_server,
    shop,
    standard_shop,
    webhook,
    webhook_server,
)
