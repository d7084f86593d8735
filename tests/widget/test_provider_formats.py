"""A self-hosted model server that refuses `json_schema` (llama-cpp-python answers it with HTTP
500): the customer still gets a normal answer, nobody is handed the conversation, and the
detection costs one refused call for the whole process."""

from __future__ import annotations

from typing import Any

import pytest

from apps.escalations.models import Escalation
from apps.reasoning.llm import remembered_response_format, response_format_refusals
from apps.reasoning.models import ReasoningTrace
from tests.support.shop import assess


@pytest.mark.django_db(transaction=True)
def test_a_server_refusing_json_schema_still_answers_the_customer(
    widget: Any, llm: Any, settings: Any
) -> None:
    settings.LLM_RESPONSE_FORMAT = "auto"  # the default
    llm.refuse("json_schema")
    llm.script(
        "assess",
        assess(response="Returns are accepted within 30 days.", confidence=9),
        assess(response="We're open 8 to 6 on weekdays.", confidence=9),
    )
    conversation_id, token = widget.conversation()

    first = widget.say(conversation_id, token, "What is your return policy?")
    second = widget.say(conversation_id, token, "When are you open?")

    assert first.status_code == 201 and second.status_code == 201
    assert first.json()["status"] == "open" and second.json()["status"] == "open"
    assert [r["text"] for r in first.json()["replies"]] == ["Returns are accepted within 30 days."]
    assert [r["text"] for r in second.json()["replies"]] == ["We're open 8 to 6 on weekdays."]
    assert not Escalation.objects.unscoped("test checks the database directly").exists()
    # One refused call in all, then the remembered form.
    assert [(r.form, r.refused) for r in llm.calls("assess")] == [
        ("json_schema", True),
        ("json_object+schema", False),
        ("json_object+schema", False),
    ]
    assert response_format_refusals() == 1
    assert remembered_response_format() == "json_object+schema"
    # The fallback is on the first turn's trace.
    first_trace = ReasoningTrace.objects.unscoped("test checks the database directly").earliest(
        "pk"
    )
    step = first_trace.steps.get(name="assess")
    assert step.error == ""
    assert step.output["response_format"] == {
        "asked": "json_schema",
        "used": "json_object+schema",
        "refused": ["json_schema"],
    }
    assert first_trace.llm_calls == 1  # a refused call costs nothing and is not metered
