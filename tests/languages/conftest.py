"""The reasoning suite's shop, fake LLM and webhook servers (re-exported, not copied)."""

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
from tests.widget.conftest import widget  # noqa: F401
