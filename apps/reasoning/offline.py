"""The offline demo model: a small deterministic responder that speaks the LLM protocol, so the
demo shows the whole flow — context fetches, critique, confirmation, tools — with no API key.

It is clearly labelled (model name "offline-demo"; replies carry `"offline": true`). Each step
declares its own offline answer (`apps/reasoning/steps/<step>.py`); this module dispatches
through the step registry, so a step with no offline answer cannot exist and an unknown step is
an error (`UnknownStep`), never a generic answer. The answers read the structured `hint` the
pipeline passes alongside the prompt rather than the prompt itself — except the language the
prompt asks the reply in (it answers the README's flows in English, Spanish and Hebrew).
It is not used by the tests of the real path, which run the openai SDK against a local
server."""

from __future__ import annotations

import json
from typing import Any

from apps.reasoning import steps
from apps.reasoning.steps import language_asked


def offline_complete(step: str, messages: list[dict[str, str]], hint: dict[str, Any]) -> str:
    # The one thing it reads from the prompt, as a model would: the language it is asked to
    # reply in (the system message's last line, "Reply in Spanish (es).").
    hint = {**hint, "language": language_asked(messages) or "en"}
    return json.dumps(steps.get(step).offline(hint), ensure_ascii=False)
