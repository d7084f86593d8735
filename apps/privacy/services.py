"""Exports and erasures of a customer's data, the retention task, and their record
(docs/privacy.md).

What an erasure does to the conversations it is given (by request or by retention):

- the conversation row stays, anonymized (no e-mail address, visitor id or token; closed), so
  the usage records that point at it and at its turns keep counting: billing and every usage
  report add up exactly as before;
- its messages stay as empty shells (seq, role, kind, time): text and data are blanked;
- its turns' traces keep their counters (calls, tokens, cost) and lose every payload: each
  reasoning step's input summary, output and error; the trace's error and fetched context;
- tool executions keep tool, status and timing, and lose params, result and error; pending
  actions (the params put to the customer for confirmation) are deleted;
- escalations lose their detail (open ones are resolved: nobody is waiting any more);
- notes written from the conversation (or one of its turns), and notes naming the customer's
  e-mail address, are deleted;
- insights proposals forget the conversation (its id, the customer's questions quoted in them);
  simulation replays of it, playground runs that read it and saved simulation cases quoting it
  lose that text;
- any other row attached to the conversation, its messages, turns or tool executions — a model
  this module does not know — is deleted (`_unknown_dependents`): an erasure never leaves a new
  kind of row behind.

Usage records keep their counts and amounts and hold no text (purpose, mode, step and model
are codes). Everything runs in one transaction; a dry run does the same work and rolls it back,
so the counts it shows are exactly what the real run would do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Count, ForeignObjectRel, Q
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from apps.accounts.models import User
from apps.billing.models import DailyUsage, UsageRecord, UsageReservation
from apps.clients.models import Client
from apps.conversations.models import (
    Conversation,
    ConversationRating,
    ConversationStatus,
    Message,
    Visibility,
)
from apps.core.exceptions import ApplicationError
from apps.escalations.models import Escalation, EscalationStatus
from apps.events.services import deliveries_erase
from apps.insights.models import InsightProposal
from apps.knowledge import cache as knowledge_cache
from apps.knowledge.models import FAQ, Article, ArticleChunk
from apps.knowledge.services.indexing import article_index
from apps.mail.models import MailAttachment, MailMessage
from apps.notes import cache as notes_cache
from apps.notes.models import Note
from apps.notes.services import note_content_hash
from apps.playground.models import PlaygroundRun
from apps.privacy.identifiers import Identifier, identifiers_sweep, subject_identifiers
from apps.privacy.models import (
    DataSubjectRequest,
    ErasedConversation,
    MatchKind,
    RequestChannel,
    RequestKind,
)
from apps.privacy.selectors import (
    SubjectMatch,
    retention_due,
    subject_conversations,
    subject_unconfirmed_conversations,
)
from apps.reasoning.models import ReasoningStep, ReasoningTrace
from apps.simulations.models import CaseRun, SimCase, SimulationRun
from apps.tools.models import PendingAction, ToolExecution

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "guidedesk.subject-export/1"
ERASED = "[erased]"
# Customer texts shorter than this ("yes", "ok", "thanks") identify nobody and appear everywhere:
# they are not searched for outside the conversation's own rows (which are blanked whole).
NEEDLE_MIN_CHARS = 8

# Fields an erasure keeps on the rows it anonymizes: codes and figures, never free text.
# Fields with choices, keys and numbers are always kept (`_blank_updates`).
KEEP_FIELDS: dict[type[models.Model], frozenset[str]] = {
    Conversation: frozenset({"language"}),
    Message: frozenset({"language"}),
    ReasoningTrace: frozenset({"mode", "model", "evaluation_outcome"}),
    ReasoningStep: frozenset({"name"}),
    ToolExecution: frozenset({"idempotency_key"}),
    Escalation: frozenset(),
    PlaygroundRun: frozenset({"mode", "rubric"}),
    CaseRun: frozenset(),
}
# Rows attached to an erased conversation that stay as they are: figures only, for billing.
KEEP_ROWS: frozenset[type[models.Model]] = frozenset(
    {UsageRecord, UsageReservation, ErasedConversation, ConversationRating}
)


# The rows an erasure starts from: what points at one of them is the customer's too.
ROOT_MODELS: tuple[type[models.Model], ...] = (
    Conversation,
    Message,
    ReasoningTrace,
    ToolExecution,
    PendingAction,
    Escalation,
    PlaygroundRun,
    CaseRun,
)


class SubjectNotFound(ApplicationError):
    status = 404
    code = "not_found"


class UnconfirmedOnly(ApplicationError):
    """Only conversations whose address the customer never confirmed match the e-mail: staff
    must look at them (`unconfirmed`) and include the customer's own by id."""

    status = 409
    code = "unconfirmed_only"

    def __init__(self, unconfirmed: list[dict[str, Any]]) -> None:
        super().__init__(
            "Only conversations whose e-mail address was never confirmed match. Check that they "
            "are this customer's and include them by id (include_unconfirmed).",
            {"unconfirmed": unconfirmed},
        )
        self.unconfirmed = unconfirmed


def unconfirmed_matches(
    *, client: Client, match: SubjectMatch, include_unconfirmed: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The conversations with the e-mail address that the customer never confirmed and staff
    did not include: what staff need to decide (id, times, how many messages the customer
    wrote) — never their content."""
    found = (
        subject_unconfirmed_conversations(
            client=client, match=match, include_unconfirmed=include_unconfirmed
        )
        .annotate(customer_messages=Count("messages", filter=Q(messages__role="user")))
        .values("public_id", "created_at", "last_message_at", "customer_messages")
    )
    return [
        {
            "id": str(row["public_id"]),
            "created_at": _iso(row["created_at"]),
            "last_message_at": _iso(row["last_message_at"]),
            "customer_messages": row["customer_messages"],
        }
        for row in found
    ]


@dataclass
class ErasureResult:
    conversations: int
    counts: dict[str, int] = field(default_factory=dict)
    request: DataSubjectRequest | None = None
    dry_run: bool = False
    # By e-mail: the matches never confirmed that staff did not include (left untouched).
    unconfirmed: list[dict[str, Any]] = field(default_factory=list)
    # What could not be erased, where and why ({"where", "what", "why", "rows"}).
    not_erased: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ExportResult:
    document: dict[str, Any]
    counts: dict[str, int]
    request: DataSubjectRequest | None = None
    unconfirmed: list[dict[str, Any]] = field(default_factory=list)


# What an erasure cannot reach, by code: where the copy is, what it is, why GuideDesk cannot
# erase it. Stored in English in the record (the API's words); the admin shows it translated.
NOT_ERASED: dict[str, tuple[Any, Any, Any]] = {
    "emails_sent": (
        _("the customer's mailbox and your mail provider's logs"),
        _("e-mails GuideDesk sent the customer (address confirmation, missed staff replies)"),
        _("they left GuideDesk when they were sent; ask your mail provider to delete its copies"),
    ),
    "llm_provider": (
        _("the LLM provider"),
        _("the prompts of the customer's turns"),
        _("kept under the provider's own retention policy; GuideDesk cannot delete them"),
    ),
    "tool_backends": (
        _("your back-office (the tools' webhooks)"),
        _("the parameters of the tool calls made for the customer"),
        _("your own systems received them; erase them there"),
    ),
}


def not_erased_item(code: str, rows: int) -> dict[str, Any]:
    where, what, why = NOT_ERASED[code]
    with translation.override("en"):
        return {"code": code, "where": str(where), "what": str(what), "why": str(why), "rows": rows}


def _not_erased(*, client: Client, ids: list[int]) -> list[dict[str, Any]]:
    """What the erasure of `ids` cannot reach (read before the erasure)."""
    conversations = Conversation.objects.for_client(client).filter(pk__in=ids)
    found = {
        "emails_sent": conversations.exclude(contact_email="").count(),
        "llm_provider": UsageRecord.objects.for_client(client)
        .filter(conversation_id__in=ids)
        .count(),
        "tool_backends": ToolExecution.objects.for_client(client)
        .filter(conversation_id__in=ids)
        .count(),
    }
    return [not_erased_item(code, rows) for code, rows in found.items() if rows]


# ---------------------------------------------------------------------------------------------
# The record
# ---------------------------------------------------------------------------------------------


def privacy_request_record(
    *,
    client: Client,
    kind: str,
    match_kind: str,
    match_digest: str,
    channel: str,
    requested_by: User | None,
    requested_by_label: str,
    conversations: int,
    counts: dict[str, int],
    unconfirmed_left_out: int = 0,
    not_erased: list[dict[str, Any]] | None = None,
) -> DataSubjectRequest:
    keep_days = int(settings.PRIVACY_RECORD_KEEP_DAYS)
    return DataSubjectRequest.objects.create(
        client=client,
        kind=kind,
        match_kind=match_kind,
        match_digest=match_digest,
        channel=channel,
        requested_by=requested_by,
        requested_by_label=requested_by_label[:200],
        conversations=conversations,
        counts=counts,
        unconfirmed_left_out=unconfirmed_left_out,
        not_erased=not_erased or [],
        keep_until=timezone.localdate() + timedelta(days=keep_days),
    )


def privacy_records_purge(*, today: date | None = None) -> int:
    """Delete the records whose keeping period is over (every client)."""
    today = today or timezone.localdate()
    deleted, _ = (
        DataSubjectRequest.objects.unscoped("privacy records past their keeping period")
        .filter(keep_until__lt=today)
        .delete()
    )
    return deleted


# ---------------------------------------------------------------------------------------------
# Erasure
# ---------------------------------------------------------------------------------------------


def _blank_updates(model: type[models.Model]) -> dict[str, Any]:
    """The UPDATE that empties every free-text field of `model` (char, text, e-mail, URL and
    JSON fields without choices), except the ones KEEP_FIELDS lists and unique keys."""
    keep = KEEP_FIELDS.get(model, frozenset())
    updates: dict[str, Any] = {}
    for f in model._meta.concrete_fields:
        if f.name in keep or f.choices or f.primary_key or f.is_relation or f.unique:
            continue
        if isinstance(f, models.JSONField):
            updates[f.name] = f.get_default()
        elif isinstance(f, (models.CharField, models.TextField)):
            updates[f.name] = None if f.null else ""
    return updates


def _label(model: type[models.Model]) -> str:
    return model._meta.label


def _needles(client: Client, conversation_ids: list[int]) -> set[str]:
    """What identifies the customer outside their conversations' own rows: their longer
    messages, e-mail addresses and visitor ids."""
    found: set[str] = set()
    texts = Message.objects.for_client(client).filter(
        conversation_id__in=conversation_ids, role="user"
    )
    for text in texts.values_list("text", flat=True).iterator():
        text = (text or "").strip()
        if len(text) >= NEEDLE_MIN_CHARS:
            found.add(text)
    for email, visitor in (
        Conversation.objects.for_client(client)
        .filter(pk__in=conversation_ids)
        .values_list("contact_email", "visitor_id")
    ):
        for value in (email, visitor):
            if value and len(value) >= NEEDLE_MIN_CHARS:
                found.add(value)
    return found


def _mentions(text: str, needles: set[str]) -> bool:
    if not text:
        return False
    lowered = text.lower()
    return any(
        n.lower() in lowered or (len(text) >= NEEDLE_MIN_CHARS and lowered in n.lower())
        for n in needles
    )


def _scrub_text(text: str, needles: set[str]) -> str:
    if not text or not _mentions(text, needles):
        return text
    for needle in sorted(needles, key=len, reverse=True):
        start = text.lower().find(needle.lower())
        while start >= 0:
            text = text[:start] + ERASED + text[start + len(needle) :]
            start = text.lower().find(needle.lower(), start + len(ERASED))
    if _mentions(text, needles):  # the whole text is a quote of part of a message
        return ERASED
    return text


def _scrub_json(value: Any, needles: set[str], ids: set[str]) -> Any:
    """`value` with every string that quotes the customer blanked and every list entry that is
    one of `ids` (conversation public ids) removed."""
    if isinstance(value, str):
        if value in ids:
            return ERASED
        return _scrub_text(value, needles)
    if isinstance(value, list):
        return [
            _scrub_json(v, needles, ids) for v in value if not (isinstance(v, str) and v in ids)
        ]
    if isinstance(value, dict):
        return {k: _scrub_json(v, needles, ids) for k, v in value.items()}
    return value


def _json_mentions(value: Any, needles: set[str], ids: set[str]) -> bool:
    text = json.dumps(value, ensure_ascii=False, default=str) if value else ""
    return bool(text) and (_mentions(text, needles) or any(i in text for i in ids))


def _scrub_rows(
    rows: Iterable[models.Model],
    fields: list[str],
    needles: set[str],
    ids: set[str],
    *,
    client: Client,
) -> int:
    """Scrub the given text/JSON fields of `rows` in Python (rows with free text about many
    conversations: insights proposals, simulation cases and reports); returns the rows changed."""
    changed = 0
    for row in rows:
        dirty: list[str] = []
        for name in fields:
            value = getattr(row, name)
            if isinstance(value, str):
                new: Any = _scrub_text(value, needles)
            else:
                new = (
                    _scrub_json(value, needles, ids)
                    if _json_mentions(value, needles, ids)
                    else value
                )
            if new != value:
                setattr(row, name, new)
                dirty.append(name)
        if dirty:
            type(row)._default_manager.filter(client=client, pk=row.pk).update(
                **{name: getattr(row, name) for name in dirty}
            )
            changed += 1
    return changed


def dependents(model: type[models.Model]) -> list[ForeignObjectRel]:
    """Every relation pointing at `model` from another row, `related_name="+"` ones included."""
    return [
        rel
        for rel in model._meta.get_fields(include_hidden=True)
        if isinstance(rel, ForeignObjectRel) and not rel.many_to_many
    ]


def _unknown_dependents(
    roots: dict[type[models.Model], list[int]],
    handled: set[type[models.Model]],
    *,
    client: Client,
) -> dict[str, int]:
    """Delete the rows of models this module does not know that point at an erased row (of
    `client`: a tenant-owned one is matched on the client too, as the tenant guard asks)."""
    counts: dict[str, int] = {}
    for root, ids in roots.items():
        if not ids:
            continue
        for rel in dependents(root):
            related = rel.related_model
            if (
                not isinstance(related, type)
                or related in handled
                or related in KEEP_ROWS
                or rel.many_to_many
                or not hasattr(rel.field, "attname")
            ):
                continue
            rows = related._default_manager.filter(**{f"{rel.field.name}__in": ids})
            if any(f.name == "client" for f in related._meta.concrete_fields):
                rows = rows.filter(client=client)
            _, per_model = rows.delete()
            for label, n in per_model.items():
                if n:
                    counts[label] = counts.get(label, 0) + n
    return counts


def _add(counts: dict[str, int], label: str, n: int) -> None:
    if n:
        counts[label] = counts.get(label, 0) + n


def _pks(rows: models.QuerySet[Any]) -> list[int]:
    return list(rows.values_list("pk", flat=True))


@dataclass(frozen=True)
class _ErasureScope:
    """What an erasure of some conversations reaches, read before anything changes: the
    conversations (`ids`), the texts that identify their customer, and every row the customer's
    turns left (ids per model)."""

    client: Client
    ids: list[int]
    public_ids: set[str]
    needles: set[str]
    emails: set[str]
    message_ids: list[int]
    playground_ids: list[int]
    case_run_ids: list[int]
    trace_ids: list[int]
    execution_ids: list[int]
    pending_ids: list[int]
    escalation_ids: list[int]

    def roots(self) -> dict[type[models.Model], list[int]]:
        """The erased rows per ROOT_MODELS entry: what points at them is the customer's too."""
        return {
            Conversation: self.ids,
            Message: self.message_ids,
            ReasoningTrace: self.trace_ids,
            ToolExecution: self.execution_ids,
            PendingAction: self.pending_ids,
            Escalation: self.escalation_ids,
            PlaygroundRun: self.playground_ids,
            CaseRun: self.case_run_ids,
        }


def _erasure_scope(client: Client, ids: list[int]) -> _ErasureScope:
    conversations = Conversation.objects.for_client(client).filter(pk__in=ids)
    public_ids = {str(p) for p in conversations.values_list("public_id", flat=True)}
    needles = _needles(client, ids)
    emails = {e for e in conversations.values_list("contact_email", flat=True) if e}
    message_ids = _pks(Message.objects.for_client(client).filter(conversation_id__in=ids))
    playground_ids = _pks(PlaygroundRun.objects.for_client(client).filter(conversation_id__in=ids))
    case_run_ids = _pks(CaseRun.objects.for_client(client).filter(conversation_id__in=ids))
    trace_ids = _pks(
        ReasoningTrace.objects.for_client(client).filter(
            Q(conversation_id__in=ids)
            | Q(playground_run_id__in=playground_ids)
            | Q(case_run_id__in=case_run_ids)
        )
    )
    execution_ids = _pks(
        ToolExecution.objects.for_client(client).filter(
            Q(conversation_id__in=ids) | Q(trace_id__in=trace_ids)
        )
    )
    return _ErasureScope(
        client=client,
        ids=ids,
        public_ids=public_ids,
        needles=needles,
        emails=emails,
        message_ids=message_ids,
        playground_ids=playground_ids,
        case_run_ids=case_run_ids,
        trace_ids=trace_ids,
        execution_ids=execution_ids,
        pending_ids=_pks(PendingAction.objects.for_client(client).filter(conversation_id__in=ids)),
        escalation_ids=_pks(Escalation.objects.for_client(client).filter(conversation_id__in=ids)),
    )


# The models `conversations_erase` erases by name; rows of any other model that point at an
# erased row go whole (`_unknown_dependents`).
ERASE_HANDLED: frozenset[type[models.Model]] = frozenset(
    {
        Conversation,
        Message,
        ReasoningTrace,
        ReasoningStep,
        ToolExecution,
        PendingAction,
        Escalation,
        Note,
        PlaygroundRun,
        CaseRun,
        MailMessage,
    }
)


def _erase_mail(scope: _ErasureScope, counts: dict[str, int]) -> None:
    """The e-mails of the conversations (the e-mail channel): their attachments deleted, files
    included; the e-mails kept as shells (direction, what became of them, when — the hourly
    caps count them) with every address, header, subject and text emptied."""
    client = scope.client
    mails = MailMessage.objects.for_client(client).filter(
        Q(conversation_id__in=scope.ids) | Q(message_id__in=scope.message_ids)
    )
    attachments = MailAttachment.objects.for_client(client).filter(mail__in=mails)
    files = [(a.file.storage, str(a.file.name)) for a in attachments.exclude(file="")]
    _add(counts, _label(MailAttachment), attachments.delete()[0])

    def delete_files() -> None:  # once the erasure commits (a dry run rolls back: none go)
        for storage, name in files:
            try:
                storage.delete(name)
            except OSError:
                logger.warning("an erased e-mail's attachment file was not deleted: %s", name)

    transaction.on_commit(delete_files)
    _blank(counts, MailMessage, mails)


def _delete_dependent_rows(scope: _ErasureScope, counts: dict[str, int]) -> None:
    """Delete the rows that go whole: those of models nobody told us about (first, while their
    parents still exist), pending actions, and the notes written from or naming the customer."""
    client = scope.client
    for label, n in _unknown_dependents(scope.roots(), set(ERASE_HANDLED), client=client).items():
        _add(counts, label, n)
    _, deleted = (
        PendingAction.objects.for_client(client).filter(conversation_id__in=scope.ids).delete()
    )
    for label, n in deleted.items():
        _add(counts, label, n)
    notes = Note.objects.for_client(client).filter(
        Q(conversation_id__in=scope.ids) | Q(trace_id__in=scope.trace_ids)
    )
    _add(counts, _label(Note), notes.delete()[0])
    for email in scope.emails:
        _add(
            counts,
            _label(Note),
            Note.objects.for_client(client).filter(content__icontains=email).delete()[0],
        )
    notes_cache.invalidate(client.pk)


def _blank(counts: dict[str, int], model: type[models.Model], rows: models.QuerySet[Any]) -> None:
    _add(counts, _label(model), rows.update(**_blank_updates(model)))


def _blank_conversation_rows(scope: _ErasureScope, counts: dict[str, int]) -> None:
    """Empty the free text of the rows the conversations' turns left (they stay as shells)."""
    client = scope.client
    _blank(
        counts,
        ReasoningStep,
        ReasoningStep.objects.for_client(client).filter(trace_id__in=scope.trace_ids),
    )
    _blank(
        counts,
        ReasoningTrace,
        ReasoningTrace.objects.for_client(client).filter(pk__in=scope.trace_ids),
    )
    _blank(
        counts,
        ToolExecution,
        ToolExecution.objects.for_client(client).filter(pk__in=scope.execution_ids),
    )
    escalations = Escalation.objects.for_client(client).filter(pk__in=scope.escalation_ids)
    escalations.filter(status=EscalationStatus.OPEN).update(
        status=EscalationStatus.RESOLVED, resolved_at=timezone.now()
    )
    _blank(counts, Escalation, escalations)
    # The rating's score stays (the outcome figures of past periods do not move); its comment,
    # in the customer's words, goes.
    _add(
        counts,
        _label(ConversationRating),
        ConversationRating.objects.for_client(client)
        .filter(conversation_id__in=scope.ids)
        .update(comment=""),
    )
    _blank(
        counts,
        PlaygroundRun,
        PlaygroundRun.objects.for_client(client).filter(pk__in=scope.playground_ids),
    )
    _blank(counts, CaseRun, CaseRun.objects.for_client(client).filter(pk__in=scope.case_run_ids))
    _blank(
        counts, Message, Message.objects.for_client(client).filter(conversation_id__in=scope.ids)
    )


PROPOSAL_TEXT_FIELDS = ["title", "question", "answer", "content", "outline", "review_comment"]


def _scrub_proposals(scope: _ErasureScope, counts: dict[str, int]) -> None:
    """Make the insights proposals forget the conversations: their ids, the questions quoting
    the customer, and the customer's words anywhere in their text."""
    client, needles, public_ids = scope.client, scope.needles, scope.public_ids
    proposals = [
        p
        for p in InsightProposal.objects.for_client(client)
        if public_ids & {str(i) for i in (p.conversation_ids or [])}
        or _json_mentions(
            [p.title, p.question, p.answer, p.content, p.outline, p.questions, p.review_comment],
            needles,
            set(),
        )
    ]
    for proposal in proposals:
        kept = [i for i in (proposal.conversation_ids or []) if str(i) not in public_ids]
        removed = len(proposal.conversation_ids or []) - len(kept)
        proposal.questions = [
            q for q in (proposal.questions or []) if not _mentions(json.dumps(q), needles)
        ]
        InsightProposal.objects.for_client(client).filter(pk=proposal.pk).update(
            conversation_ids=kept,
            count=max(0, proposal.count - removed),
            questions=proposal.questions,
        )
    _scrub_rows(proposals, PROPOSAL_TEXT_FIELDS, needles, public_ids, client=client)
    _add(counts, _label(InsightProposal), len(proposals))


def _scrub_simulations(scope: _ErasureScope, counts: dict[str, int]) -> None:
    """Blank the customer's words in saved simulation cases and in the reports of the
    simulation runs that replayed the conversations."""
    client, needles, public_ids = scope.client, scope.needles, scope.public_ids
    case_fields = ["description", "history", "turns", "simulated", "expect"]
    cases = [
        case
        for case in SimCase.objects.for_client(client)
        if _json_mentions([getattr(case, name) for name in case_fields], needles, public_ids)
    ]
    _add(
        counts,
        _label(SimCase),
        _scrub_rows(cases, case_fields, needles, public_ids, client=client),
    )
    run_ids = set(
        CaseRun.objects.for_client(client)
        .filter(pk__in=scope.case_run_ids)
        .values_list("run_id", flat=True)
    )
    runs = list(SimulationRun.objects.for_client(client).filter(pk__in=run_ids))
    _add(
        counts,
        _label(SimulationRun),
        _scrub_rows(
            runs, ["name", "selection", "report", "error"], needles, public_ids, client=client
        ),
    )


def _anonymize_conversations(scope: _ErasureScope, counts: dict[str, int]) -> None:
    """Last, the conversations themselves: anonymized, closed shells the usage records still
    count, each listed as erased."""
    client = scope.client
    _add(
        counts,
        _label(Conversation),
        Conversation.objects.for_client(client)
        .filter(pk__in=scope.ids)
        .update(
            status=ConversationStatus.CLOSED,
            contact_email_confirmed_at=None,
            **_blank_updates(Conversation),
        ),
    )
    ErasedConversation.objects.bulk_create(
        [ErasedConversation(client=client, conversation_id=pk) for pk in scope.ids],
        ignore_conflicts=True,
    )


def conversations_erase(*, client: Client, conversation_ids: list[int]) -> dict[str, int]:
    """Erase the customer data of the client's conversations `conversation_ids` (module
    docstring); returns the rows touched per model. Call inside a transaction."""
    ids = _pks(Conversation.objects.for_client(client).filter(pk__in=conversation_ids))
    counts: dict[str, int] = {}
    if not ids:
        return counts
    scope = _erasure_scope(client, ids)
    counts |= deliveries_erase(client=client, conversation_public_ids=scope.public_ids)
    _erase_mail(scope, counts)
    _delete_dependent_rows(scope, counts)
    _blank_conversation_rows(scope, counts)
    # Free text about many conversations: proposals, saved cases, simulation reports.
    _scrub_proposals(scope, counts)
    _scrub_simulations(scope, counts)
    _anonymize_conversations(scope, counts)
    return counts


# Not swept for identifiers: the conversation rows (blanked by `conversations_erase`), the
# erasure's own record, knowledge chunks (rebuilt from their redacted article), and billing
# rows (codes and figures).
SWEEP_SKIP: frozenset[type[models.Model]] = frozenset(
    {
        Conversation,
        ArticleChunk,
        DataSubjectRequest,
        ErasedConversation,
        UsageRecord,
        UsageReservation,
        DailyUsage,
    }
)


def shared_content_redact(
    *, client: Client, identifiers: list[Identifier], leave_conversations: Collection[int] = ()
) -> dict[str, int]:
    """Replace the customer's identifiers with `[erased]` in every row of the client that still
    quotes them, and index again the knowledge articles that changed (their chunks, full-text
    vectors and embeddings come from the redacted text; the topics cache is invalidated).
    Returns the rows redacted per model (labels end in " redacted")."""
    changed = identifiers_sweep(
        client=client,
        identifiers=identifiers,
        skip=SWEEP_SKIP,
        leave_conversations=leave_conversations,
    )
    for article in Article.objects.for_client(client).filter(
        pk__in=changed.get(Article, []) + changed.get(FAQ, [])
    ):
        article.refresh_hash()
        Article.objects.for_client(client).filter(pk=article.pk).update(
            content_hash=article.content_hash
        )
        article_index(article=article)
    for note in Note.objects.for_client(client).filter(pk__in=changed.get(Note, [])):
        Note.objects.for_client(client).filter(pk=note.pk).update(
            content_hash=note_content_hash(type=note.type, ref=note.ref, content=note.content)
        )
    knowledge_cache.invalidate(client.pk)
    notes_cache.invalidate(client.pk)
    return {f"{_label(model)} redacted": len(pks) for model, pks in changed.items() if pks}


def _requester_label(requested_by: User | None, label: str) -> str:
    if label:
        return label
    return requested_by.email if requested_by is not None else ""


def _erasure_targets(
    *, client: Client, match: SubjectMatch, include_unconfirmed: Collection[str]
) -> tuple[list[int], list[dict[str, Any]], list[int]]:
    """The conversations an erasure of `match` erases, the unconfirmed matches staff must look
    at (`unconfirmed_matches`) and the ids of those it leaves alone. Raises SubjectNotFound or
    UnconfirmedOnly when there is nothing to erase."""
    ids = list(
        subject_conversations(
            client=client, match=match, include_unconfirmed=include_unconfirmed
        ).values_list("pk", flat=True)
    )
    unconfirmed = unconfirmed_matches(
        client=client, match=match, include_unconfirmed=include_unconfirmed
    )
    if not ids:
        if unconfirmed:
            raise UnconfirmedOnly(unconfirmed)
        raise SubjectNotFound("No conversation of this client matches.")
    left_alone = list(
        subject_unconfirmed_conversations(
            client=client, match=match, include_unconfirmed=include_unconfirmed
        ).values_list("pk", flat=True)
    )
    return ids, unconfirmed, left_alone


def subject_erase(
    *,
    client: Client,
    match: SubjectMatch,
    channel: str,
    requested_by: User | None = None,
    requested_by_label: str = "",
    dry_run: bool = False,
    include_unconfirmed: Collection[str] = (),
    identifiers: Collection[str] = (),
) -> ErasureResult:
    """Erase everything held about the customer `match` identifies in `client`'s data, and
    record it. A dry run does the same work, rolls it back and records nothing. By e-mail, the
    conversations whose address was never confirmed are left alone and listed
    (`ErasureResult.unconfirmed`) unless staff include them by id (`include_unconfirmed`).
    The customer's identifiers (`apps.privacy.identifiers`, plus what staff add in
    `identifiers`) are then redacted from every other row of the client that quotes them —
    knowledge articles (indexed again), proposals, cases, notes, … What it cannot reach is
    listed (`ErasureResult.not_erased`, the record). Raises SubjectNotFound when no
    conversation of the client matches, UnconfirmedOnly when only unconfirmed ones do."""
    ids, unconfirmed, left_alone = _erasure_targets(
        client=client, match=match, include_unconfirmed=include_unconfirmed
    )
    with transaction.atomic():
        found = subject_identifiers(client=client, conversation_ids=ids, extra=identifiers)
        not_erased = _not_erased(client=client, ids=ids)
        counts = conversations_erase(client=client, conversation_ids=ids)
        for label, n in shared_content_redact(
            client=client, identifiers=found, leave_conversations=left_alone
        ).items():
            _add(counts, label, n)
        if dry_run:
            transaction.set_rollback(True)
            return ErasureResult(
                conversations=len(ids),
                counts=counts,
                dry_run=True,
                unconfirmed=unconfirmed,
                not_erased=not_erased,
            )
        request = privacy_request_record(
            client=client,
            kind=RequestKind.ERASE,
            match_kind=match.kind,
            match_digest=match.digest(),
            channel=channel,
            requested_by=requested_by,
            requested_by_label=_requester_label(requested_by, requested_by_label),
            conversations=len(ids),
            counts=counts,
            unconfirmed_left_out=len(unconfirmed),
            not_erased=not_erased,
        )
        ErasedConversation.objects.for_client(client).filter(conversation_id__in=ids).update(
            request=request
        )
    logger.info(
        "privacy: erased %d conversations of client %s (request %s)",
        len(ids),
        client.slug,
        request.public_id,
    )
    return ErasureResult(
        conversations=len(ids),
        counts=counts,
        request=request,
        unconfirmed=unconfirmed,
        not_erased=not_erased,
    )


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _export_messages(client: Client, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The visible messages of each conversation, in order."""
    messages: dict[int, list[dict[str, Any]]] = {pk: [] for pk in ids}
    for m in (
        Message.objects.for_client(client)
        .filter(conversation_id__in=ids, visibility=Visibility.VISIBLE)
        .order_by("conversation_id", "seq")
    ):
        item: dict[str, Any] = {
            "seq": m.seq,
            "role": m.role,
            "kind": m.kind,
            "text": m.text,
            "created_at": _iso(m.created_at),
        }
        if isinstance(m.data, dict) and m.data.get("options"):
            item["options"] = m.data["options"]
        messages[m.conversation_id].append(item)
    return messages


def _export_tool_calls(client: Client, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    tools: dict[int, list[dict[str, Any]]] = {pk: [] for pk in ids}
    for ex in (
        ToolExecution.objects.for_client(client)
        .filter(conversation_id__in=ids)
        .select_related("tool")
        .order_by("created_at", "pk")
    ):
        if ex.conversation_id is None:
            continue
        tools[ex.conversation_id].append(
            {
                "tool": ex.tool.name,
                "status": ex.status,
                "params": ex.params,
                "result": ex.result,
                "created_at": _iso(ex.created_at),
            }
        )
    return tools


def _export_escalations(client: Client, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    escalations: dict[int, list[dict[str, Any]]] = {pk: [] for pk in ids}
    for esc in (
        Escalation.objects.for_client(client)
        .filter(conversation_id__in=ids)
        .order_by("created_at", "pk")
    ):
        escalations[esc.conversation_id].append(
            {"reason": esc.reason, "status": esc.status, "created_at": _iso(esc.created_at)}
        )
    return escalations


def _export_ratings(client: Client, ids: list[int]) -> dict[int, dict[str, Any]]:
    return {
        r.conversation_id: {
            "score": r.score,
            "comment": r.comment,
            "created_at": _iso(r.created_at),
        }
        for r in ConversationRating.objects.for_client(client).filter(conversation_id__in=ids)
    }


def _export_emails(c: Conversation) -> list[dict[str, Any]]:
    """The e-mails GuideDesk sent the customer of `c`."""
    emails: list[dict[str, Any]] = []
    if c.contact_email:
        emails.append(
            {
                "kind": "address_confirmation",
                "to": c.contact_email,
                "at": _iso(c.contact_email_confirmed_at),
            }
        )
    if c.reply_emailed_at and c.contact_email:
        emails.append(
            {
                "kind": "staff_replies",
                "to": c.contact_email,
                "at": _iso(c.reply_emailed_at),
                "replies_up_to_seq": c.reply_emailed_seq,
            }
        )
    return emails


def _export_conversation(c: Conversation) -> dict[str, Any]:
    """The conversation's own fields in the export (its rows are added by the caller)."""
    return {
        "id": str(c.public_id),
        "created_at": _iso(c.created_at),
        "last_message_at": _iso(c.last_message_at),
        "status": c.status,
        "language": c.language,
        "visitor_id": c.visitor_id,
        "contact_email": c.contact_email,
        "customer": {
            "id": c.customer_id,
            "email": c.customer_email,
            "name": c.customer_name,
            "verified_via": c.customer_verified_via,
            "verified_at": _iso(c.customer_verified_at),
        },
        "contact_email_confirmed": c.contact_email_confirmed_at is not None,
    }


def subject_export_document(
    *, client: Client, conversations: list[Conversation]
) -> tuple[dict[str, Any], dict[str, int]]:
    """The export of `conversations` (one JSON document) and its counts."""
    ids = [c.pk for c in conversations]
    messages = _export_messages(client, ids)
    tools = _export_tool_calls(client, ids)
    escalations = _export_escalations(client, ids)
    ratings = _export_ratings(client, ids)
    items = []
    counts = {"conversations": len(ids), "messages": 0, "tool_calls": 0, "emails": 0}
    for c in conversations:
        emails = _export_emails(c)
        counts["messages"] += len(messages[c.pk])
        counts["tool_calls"] += len(tools[c.pk])
        counts["emails"] += len(emails)
        items.append(
            {
                **_export_conversation(c),
                "messages": messages[c.pk],
                "tool_calls": tools[c.pk],
                "escalations": escalations[c.pk],
                "emails": emails,
                "rating": ratings.get(c.pk),
            }
        )
    document = {
        "format": EXPORT_FORMAT,
        "business": client.name,
        "generated_at": _iso(timezone.now()),
        "conversations": items,
    }
    return document, counts


def subject_export(
    *,
    client: Client,
    match: SubjectMatch,
    channel: str,
    requested_by: User | None = None,
    requested_by_label: str = "",
    dry_run: bool = False,
    include_unconfirmed: Collection[str] = (),
) -> ExportResult:
    """Everything held about the customer `match` identifies, as one JSON document; recorded
    unless `dry_run`. By e-mail, conversations whose address was never confirmed are not in it
    unless staff include them by id (`include_unconfirmed`); the document lists them apart
    (`unconfirmed_matches`: ids and times, no content). Raises SubjectNotFound when no
    conversation of the client matches, UnconfirmedOnly when only unconfirmed ones do."""
    conversations = list(
        subject_conversations(client=client, match=match, include_unconfirmed=include_unconfirmed)
    )
    unconfirmed = unconfirmed_matches(
        client=client, match=match, include_unconfirmed=include_unconfirmed
    )
    if not conversations:
        if unconfirmed:
            raise UnconfirmedOnly(unconfirmed)
        raise SubjectNotFound("No conversation of this client matches.")
    document, counts = subject_export_document(client=client, conversations=conversations)
    document["unconfirmed_matches"] = unconfirmed
    if dry_run:
        return ExportResult(document={}, counts=counts, unconfirmed=unconfirmed)
    request = privacy_request_record(
        client=client,
        kind=RequestKind.EXPORT,
        match_kind=match.kind,
        match_digest=match.digest(),
        channel=channel,
        requested_by=requested_by,
        requested_by_label=_requester_label(requested_by, requested_by_label),
        conversations=len(conversations),
        counts=counts,
        unconfirmed_left_out=len(unconfirmed),
    )
    document["request"] = str(request.public_id)
    return ExportResult(document=document, counts=counts, request=request, unconfirmed=unconfirmed)


def subject_export_html(document: dict[str, Any], *, language: str | None = None) -> str:
    """A readable rendering of an export document (the same content), for the customer: in
    `language`, else the language of their first conversation."""
    conversations = document.get("conversations") or []
    language = language or (conversations[0].get("language") if conversations else None)
    with translation.override(language or None):
        return render_to_string("privacy/export.html", {"document": document})


# ---------------------------------------------------------------------------------------------
# Retention
# ---------------------------------------------------------------------------------------------


@dataclass
class RetentionReport:
    erased: int = 0
    remaining: int = 0
    clients: dict[str, int] = field(default_factory=dict)
    records_purged: int = 0


def retention_apply(
    *,
    now: datetime | None = None,
    limit: int | None = None,
    client: Client | None = None,
    dry_run: bool = False,
) -> RetentionReport:
    """Erase, for every client whose plan keeps conversations a limited time, the
    conversations idle longer than that — at most `limit` (PRIVACY_RETENTION_BATCH) in all per
    run, oldest first; the next run continues. Logs one progress line per client. Idempotent:
    an erased conversation is never picked again."""
    now = now or timezone.now()
    budget = int(limit if limit is not None else settings.PRIVACY_RETENTION_BATCH)
    report = RetentionReport()
    clients = (
        [client]
        if client is not None
        else list(
            Client.objects.filter(plan__retention_days__gt=0).select_related("plan").order_by("pk")
        )
    )
    for each in clients:
        days = int(each.plan.retention_days or 0)
        if days <= 0:
            continue
        due = retention_due(client=each, cutoff=now - timedelta(days=days))
        total = due.count()
        take = min(total, max(budget, 0))
        ids = list(due.values_list("pk", flat=True)[:take])
        if ids:
            with transaction.atomic():
                counts = conversations_erase(client=each, conversation_ids=ids)
                if dry_run:
                    transaction.set_rollback(True)
                else:
                    privacy_request_record(
                        client=each,
                        kind=RequestKind.RETENTION,
                        match_kind=MatchKind.AGE,
                        match_digest="",
                        channel=RequestChannel.SCHEDULE,
                        requested_by=None,
                        requested_by_label=f"retention: {days} days",
                        conversations=len(ids),
                        counts=counts,
                    )
        budget -= len(ids)
        report.erased += len(ids)
        report.remaining += total - len(ids)
        report.clients[each.slug] = len(ids)
        logger.info(
            "privacy retention: client %s: %s %d of %d conversations idle > %d days "
            "(%d left for the next run)",
            each.slug,
            "would erase" if dry_run else "erased",
            len(ids),
            total,
            days,
            total - len(ids),
        )
    if not dry_run and client is None:
        report.records_purged = privacy_records_purge(today=now.date())
    return report
