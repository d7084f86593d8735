"""Teach from staff: a flagged answer with a correction, or a staff reply after a hand-off,
becomes an insights proposal — the same review item the nightly run makes (docs/architecture.md,
"Insights", *Flag and teach*).

Nothing here reaches a prompt. An FAQ proposal becomes a published FAQ article, a note
proposal's note (created `pending_review`) becomes active, and an article proposal's draft is
published only when staff approve the proposal (`apps.insights.services.proposal_approve`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _

from apps.clients.models import Client
from apps.conversations.models import Message, Role, Visibility
from apps.core.exceptions import ApplicationError
from apps.flags.models import MessageFlag
from apps.flags.services import message_flag
from apps.insights.models import InsightProposal, ProposalKind, ProposalOrigin, ProposalStatus
from apps.insights.services import MAX_NOTE_CHARS, draft_outline
from apps.notes.models import NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add

TEACH_KINDS = (ProposalKind.NOTE, ProposalKind.FAQ, ProposalKind.ARTICLE)
QUESTION_MESSAGES = 3  # the customer's messages a reply answered, at most


def _clip(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def asked_before(message: Message) -> str:
    """What the customer wrote just before `message`: their visible messages since the previous
    reply (the last few), oldest first."""
    earlier = (
        Message.objects.for_client(message.client)
        .filter(
            conversation_id=message.conversation_id,
            seq__lt=message.seq,
            visibility=Visibility.VISIBLE,
        )
        .order_by("-seq")
        .only("role", "text")[:20]
    )
    asked: list[str] = []
    for row in earlier:
        if row.role == Role.USER:
            if row.text.strip():
                asked.append(row.text.strip())
            if len(asked) >= QUESTION_MESSAGES:
                break
        elif asked:
            break
    return " ".join(reversed(asked))  # one line: it may become an FAQ title


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, {"fields": {field: message}}, code="invalid")


def _proposal(
    *,
    client: Client,
    kind: str,
    origin: str,
    key: str,
    title: str,
    question: str,
    answer: str,
    note_content: str,
    conversation: Any,
    flag: MessageFlag | None = None,
    source_message: Message | None = None,
) -> InsightProposal:
    if kind not in TEACH_KINDS:
        raise _invalid("teach_as", _("Choose note, faq or article."))
    question = _clip(question, 1000)
    proposal = InsightProposal(
        client=client,
        kind=kind,
        origin=origin,
        title=_clip(title, 200),
        topic_key=key,
        count=1,
        conversation_ids=[str(conversation.public_id)],
        flag=flag,
        source_message=source_message,
    )
    if kind == ProposalKind.FAQ:
        proposal.question, proposal.answer = question, answer[:5000]
    elif kind == ProposalKind.ARTICLE:
        proposal.question, proposal.answer = question, answer[:5000]
        proposal.questions = [question] if question else []
        proposal.outline = draft_outline(
            title=proposal.title, questions=proposal.questions, answer=answer
        )
    else:
        # The note waits for review with the proposal: it reaches no prompt until approved.
        note = note_add(
            client=client,
            type=NoteType.STRATEGY,
            content=note_content[:MAX_NOTE_CHARS],
            source=NoteSource.INSIGHT,
            status=NoteStatus.PENDING_REVIEW,
            conversation=conversation,
        )
        if note.status != NoteStatus.PENDING_REVIEW:
            message = _("The same note is already active or was rejected before.")
            raise _invalid("teach_as", message)
        proposal.note_type, proposal.content, proposal.note = note.type, note.content, note
    proposal.save()
    return proposal


@transaction.atomic
def flag_and_teach(
    *,
    client: Client,
    message: Message,
    reason: str,
    correction: str = "",
    teach_as: str = "",
    actor: Any = None,
) -> tuple[MessageFlag, InsightProposal | None]:
    """Flag the assistant's reply; with a correction and `teach_as` (note | faq | article), also
    propose it for review. Without a correction the flag is only a record (and a filter)."""
    flag = message_flag(
        client=client, message=message, reason=reason, correction=correction, actor=actor
    )
    if not teach_as:
        return flag, None
    if not flag.correction:
        raise _invalid("correction", _("Write the correction to teach from."))
    question = asked_before(message)
    reply = _clip(message.text, 500)
    content = (
        _("When a customer asks: “%(question)s”, do not answer “%(reply)s”. Instead: %(fix)s")
        % {"question": _clip(question, 400), "reply": reply, "fix": flag.correction}
        if question
        else _("Do not answer “%(reply)s”. Instead: %(fix)s")
        % {"reply": reply, "fix": flag.correction}
    )
    proposal = _proposal(
        client=client,
        kind=teach_as,
        origin=ProposalOrigin.FLAG,
        key=f"flag:{flag.public_id}",
        title=_("Flagged answer: %(question)s") % {"question": question or reply},
        question=question,
        answer=flag.correction,
        note_content=content,
        conversation=message.conversation,
        flag=flag,
    )
    return flag, proposal


@transaction.atomic
def staff_reply_teach(
    *, client: Client, message: Message, teach_as: str = ProposalKind.FAQ
) -> InsightProposal:
    """Propose a staff reply (the answer) to what the customer asked before it (the question).
    Once per reply while a proposal of it is waiting for review."""
    if message.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    if message.role != Role.STAFF or message.visibility != Visibility.VISIBLE:
        raise _invalid("message", _("Only a staff reply to the customer can be taught from."))
    pending = (
        InsightProposal.objects.for_client(client)
        .filter(source_message=message, status=ProposalStatus.PENDING_REVIEW)
        .first()
    )
    if pending is not None:
        return pending
    question = asked_before(message)
    if not question:
        raise _invalid("message", _("The customer asked nothing before this reply."))
    content = _("When a customer asks: “%(question)s”, answer: %(answer)s") % {
        "question": _clip(question, 400),
        "answer": message.text.strip(),
    }
    return _proposal(
        client=client,
        kind=teach_as,
        origin=ProposalOrigin.STAFF_REPLY,
        key=f"reply:{message.public_id}",
        title=_("Staff reply: %(question)s") % {"question": question},
        question=question,
        answer=message.text.strip(),
        note_content=content,
        conversation=message.conversation,
        source_message=message,
    )
