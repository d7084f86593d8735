"""Reply parsing on its own (apps/reasoning/replies.py): no gateway, no LLMError."""

from __future__ import annotations

import pytest

from apps.reasoning.replies import InvalidReply, reply_parse
from apps.reasoning.steps.assess import AssessOut
from apps.reasoning.steps.compose import ComposeOut


def test_block_comments_and_nested_trailing_commas_are_repaired() -> None:
    text = """```json
{
  /* the model's own note */
  "response": "Your order ships today.",
  "confidence": 7,
  "tool_params": {"ids": [1, 2,],},
}
```"""

    parsed = reply_parse("assess", text, AssessOut)

    assert parsed.response == "Your order ships today."
    assert parsed.confidence == 7
    assert parsed.tool_params == {"ids": [1, 2]}


def test_a_reply_that_does_not_fit_the_schema_names_the_step_and_field() -> None:
    with pytest.raises(InvalidReply) as caught:
        reply_parse("compose", '{"confidence": 3}', ComposeOut)

    assert "'compose' schema" in str(caught.value)
    assert "response" in str(caught.value)


def test_an_empty_reply_is_invalid() -> None:
    with pytest.raises(InvalidReply, match="empty reply"):
        reply_parse("compose", "   ", ComposeOut)
