"""The Yes/No buttons' structured answer in the pure rule (`guards.confirmation_decision`), and
the model's opinion, which never confirms anything on its own."""

from __future__ import annotations

from typing import Any

import pytest

from apps.reasoning.guards import confirmation_decision, params_digest
from apps.tools.models import PendingAction, PendingActionStatus
from apps.tools.pending import OpenQuestion, StructuredAnswer, params_hash
from tests.reasoning.helpers import open_question_on
from tests.support.shop import cancel_assess, critique

ORDER = {"order_id": "TH-12345"}
DIGEST = params_hash(ORDER)[:16]


def question(**facts: Any) -> OpenQuestion:
    return open_question_on(ORDER, **({"action_id": 7, "digest": DIGEST} | facts))


def press(answer: str = "yes", action: int | None = 7, digest: str = DIGEST) -> StructuredAnswer:
    return StructuredAnswer(action=action, digest=digest, answer=answer)


def test_the_digest_is_the_params_hash_prefix() -> None:
    assert params_digest(ORDER) == params_digest(params_hash(ORDER)) == DIGEST
    assert len(DIGEST) == 16 and params_digest({"order_id": "TH-12346"}) != DIGEST


@pytest.mark.parametrize(
    ("facts", "text", "status"),
    [
        # a matching press decides, whatever the text (any language, or none we know)
        ({"structured": press("yes")}, "כן", PendingActionStatus.CONFIRMED),
        ({"structured": press("yes")}, "Jawohl, sehr gerne doch", PendingActionStatus.CONFIRMED),
        ({"structured": press("no")}, "yes", PendingActionStatus.DECLINED),
        ({"structured": press("no")}, "לא", PendingActionStatus.DECLINED),
        # a press for anything else is never a yes, even with yes as its text
        ({"structured": press("yes", action=8)}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes", action=None)}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes", digest="0" * 16)}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes", digest=DIGEST[:8])}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes", digest="")}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("maybe")}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes", digest="ü" * 16)}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes"), "digest": ""}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes"), "action_id": None}, "yes", PendingActionStatus.EXPIRED),
        # the question's own facts still come first
        ({"structured": press("yes"), "shown_before": False}, "yes", PendingActionStatus.PENDING),
        ({"structured": press("yes"), "expired": True}, "yes", PendingActionStatus.EXPIRED),
        ({"structured": press("yes"), "first_reply": False}, "yes", PendingActionStatus.EXPIRED),
        (
            {"structured": press("yes"), "another_confirmed": True},
            "yes",
            PendingActionStatus.EXPIRED,
        ),
        # without a press the typed answer decides, as before
        ({}, "yes", PendingActionStatus.CONFIRMED),
        ({}, "no", PendingActionStatus.DECLINED),
    ],
)
def test_a_press_settles_exactly_its_question(facts: dict[str, Any], text: str, status: str):
    assert confirmation_decision(question(**facts), text) == status


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, None),
        (
            {"action": 7, "digest": DIGEST.upper(), "answer": "yes"},
            StructuredAnswer(7, DIGEST, "yes"),
        ),
        ("yes", StructuredAnswer(None, "", "")),
        (
            {"action": True, "digest": DIGEST, "answer": "yes"},
            StructuredAnswer(None, DIGEST, "yes"),
        ),
        ({"action": "7", "digest": DIGEST, "answer": "yes"}, StructuredAnswer(None, DIGEST, "yes")),
    ],
)
def test_a_stored_press_is_read_strictly(data: Any, expected: StructuredAnswer | None) -> None:
    assert StructuredAnswer.from_data(data) == expected


# --- the model's opinion ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "answer",
    ["Hmm, let me think", "Sí, pero primero dime cuándo llega", "אם אפשר", "ok if it's free"],
)
def test_a_model_saying_the_customer_confirmed_runs_nothing(chat, llm, webhook, answer):
    llm.script("assess", cancel_assess(needs_confirmation=False))
    llm.script("critique", critique("ASK_USER", "Cancel it?", "destructive"))
    [asked] = chat.say("Cancel order TH-12345")
    assert asked.kind == "confirmation_request"

    # No code-level yes: the model and its critique both claim the customer confirmed.
    llm.script(
        "assess",
        cancel_assess(
            confirmed=True,
            response="The customer confirmed, so I am cancelling order TH-12345 now.",
            confidence=10,
        ),
    )
    llm.script("critique", critique("PROCEED", reasoning="The customer confirmed the cancel."))
    [reply] = chat.say(answer)

    assert webhook.requests == []  # nothing ran
    assert reply.kind == "confirmation_request"  # asked again, in code
    statuses = list(
        PendingAction.objects.unscoped("test checks the database directly")
        .order_by("created_at")
        .values_list("status", flat=True)
    )
    assert statuses == [PendingActionStatus.EXPIRED, PendingActionStatus.PENDING]
