"""Asking a confirmation question again, with its Yes/No buttons, when the customer's typed
answer was neither a clear yes nor a clear no (thanks-but, sarcasm, a condition, a reversal, a
question about the action).

The typed-answer rule (`guards.confirmation_reading`) already closed the question — nothing
runs on an unclear answer. Here the turn decides what to say: when the answer looked like an
answer to the question (`Reading.reask`), the same action is put to the customer once more, with
the buttons and the reason, before any model is asked; otherwise (another order, a new request)
the message goes through the pipeline as a new request. The question asked again keeps the first
one's deadline, and is asked again only once: a second unclear answer is a new request.
"""

from __future__ import annotations

from apps.conversations.models import Kind
from apps.reasoning import guards
from apps.reasoning.turn import Outcome, Reply, Turn
from apps.tools.models import PendingAction
from apps.tools.pending import pending_create, pending_expired_by_answer


def record_settled(turn: Turn, settled: PendingAction) -> None:
    """The trace's `confirmation` step: which question this message settled, how, and why."""
    output: dict[str, object] = {"pending_action": settled.pk, "status": settled.status}
    if (turn.user_message.data or {}).get("confirm") is not None:
        output["by"] = "button"
    else:
        reading = guards.confirmation_reading(
            turn.user_message.text, settled.params, settled.tool.name
        )
        output |= {"by": "typed", "reading": reading.as_data()}
    turn.rec.step("confirmation", output=output)


def reask_outcome(turn: Turn) -> Outcome | None:
    """The question asked again (a CONFIRMATION_REQUEST reply carrying the buttons' action and
    digest), or None when this message should go through the pipeline."""
    if (
        turn.confirmed is not None
        or turn.declined is not None
        or turn.dry_run
        or not turn.question_touched
    ):
        return None
    closed = pending_expired_by_answer(client=turn.client, user_message=turn.user_message)
    if closed is None:
        return None
    reading = guards.confirmation_reading(turn.user_message.text, closed.params, closed.tool.name)
    asked_again = bool(closed.question and (closed.question.data or {}).get("reask"))
    turn.rec.step(
        "confirmation",
        output={
            "pending_action": closed.pk,
            "status": closed.status,
            "by": "typed",
            "reading": reading.as_data(),
            "asked_again": reading.reask and not asked_again,
        },
    )
    if not reading.reask or asked_again:
        return None
    again = pending_create(
        client=turn.client,
        conversation=turn.conversation,
        tool=closed.tool,
        params=closed.params,
        proposed_in=turn.user_message,
        expires_at=closed.expires_at,
    )
    turn.verdicts.append("confirm")  # not a knowledge answer: the evaluation leaves it alone
    return Outcome(
        [
            Reply(
                guards.reask_text(closed.tool, closed.params),
                kind=Kind.CONFIRMATION_REQUEST,
                data={
                    "pending_action": again.pk,
                    "digest": guards.params_digest(closed.params),
                    "tool": closed.tool.name,
                    "params": closed.params,
                    "reask": True,
                    "reason": reading.reason,
                },
            )
        ]
    )
