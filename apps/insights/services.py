"""Insights: turn what went wrong into proposals staff approve (docs/architecture.md, "Insights").

`generate_insights` reads one client's evidence for a window (escalations, low-confidence and
questioned answers, FAILURE notes), sends compact summaries — bounded in tokens — to ONE
`insights` LLM call through the meter (purpose `insights`, checked against the monthly budget),
validates what comes back (only conversation ids it was given; counts recomputed from the data)
and stores `pending_review` proposals. A topic whose conversations include turns where the
knowledge search found nothing useful (`no_knowledge` evidence), or turns that searched the
knowledge base and still went wrong, is a knowledge gap: its FAQ proposal
becomes a "missing article" proposal, carrying the customers' questions (from the data) and a
drafted outline. `proposal_draft_article` turns one into a DRAFT article (which reaches no
prompt). `proposal_approve` / `proposal_reject` are the only way a proposal goes anywhere: an
approved FAQ becomes a published FAQ article, an approved missing article has its draft
published, an approved note becomes active. Nothing the model proposes reaches a customer before
a person approves it.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from apps.billing.models import UsagePurpose
from apps.clients.models import AIMode, Client
from apps.core.exceptions import ApplicationError
from apps.insights.models import (
    InsightProposal,
    InsightRun,
    ProposalKind,
    ProposalStatus,
    RunStatus,
)
from apps.insights.selectors import Evidence, insight_evidence
from apps.knowledge.models import Article, ArticleKind, ArticleStatus
from apps.knowledge.selectors import business_info_for
from apps.knowledge.services.articles import article_publish, article_save
from apps.notes.models import NoteSource, NoteStatus, NoteType
from apps.notes.services import note_add, note_set_status, note_update
from apps.reasoning.llm import LLMError, estimate_tokens
from apps.reasoning.meter import Meter, TokenCapExceeded, UsageLimitReached
from apps.reasoning.steps import insights as insights_step
from apps.reasoning.steps.insights import InsightsOut, InsightTopicOut

__all__ = [
    "InsightsResult",
    "generate_insights",
    "insight_window",
    "insights_run_now",
    "insights_run_queued",
    "proposal_approve",
    "proposal_draft_article",
    "proposal_reject",
]

logger = logging.getLogger(__name__)

MAX_NOTE_CHARS = 2000
MAX_GAP_QUESTIONS = 10  # customers' questions kept on a missing-article proposal
GAP_TAG = "knowledge gap"
REF_LENGTH = 8  # conversation ids are sent as the first 8 hex digits of their public id
PLACEHOLDER = re.compile(r"\[[^\]]{3,}\]")  # "[write the refund window here]"
RUN_STEPS = 3  # a run's progress: read the evidence, ask the model, store the proposals


@dataclass
class InsightsResult:
    run: InsightRun
    proposals: list[InsightProposal] = field(default_factory=list)
    repeated: bool = False  # the window had already been analysed: nothing was done


def insight_window(*, days: int, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The last `days` whole days before today (server time zone): re-running the same night
    gives the same window, so the run is found instead of repeated."""
    if days < 1:
        raise ApplicationError("days must be at least 1.", {"fields": {"days": "At least 1."}})
    today = timezone.localdate(now or timezone.now())
    until = timezone.make_aware(datetime.combine(today, datetime.min.time()))
    return until - timedelta(days=days), until


# -- the run ---------------------------------------------------------------------------------------


def generate_insights(
    *, client: Client, since: datetime, until: datetime, dry_run: bool = False
) -> InsightsResult:
    """Analyse `client`'s [since, until) and store pending proposals. Idempotent per client and
    window: a finished run is returned as it is (no model call, no new proposal); a failed or
    abandoned one is run again. `dry_run` calls the model and returns unsaved proposals without
    storing anything but the run record."""
    if since >= until:
        raise ApplicationError("The window is empty: since must be before until.")
    run = _claim_run(client=client, since=since, until=until, dry_run=dry_run)
    if run is None:
        existing = InsightRun.objects.for_client(client).get(window_start=since, window_end=until)
        proposals = list(existing.proposals.order_by("-count", "title"))
        return InsightsResult(run=existing, proposals=proposals, repeated=True)

    evidence = insight_evidence(client=client, since=since, until=until)
    found: dict[str, int] = {}
    for item in evidence:
        found[item.kind] = found.get(item.kind, 0) + 1
    run.found = found
    if not evidence:
        return InsightsResult(run=_finish(run, dry_run=dry_run))
    _step(run, 1, dry_run=dry_run)

    refs = _refs(evidence)
    chosen, left_out = _bounded(evidence, refs)
    run.items_sent, run.items_left_out = len(chosen), left_out
    meter = Meter(
        client=client,
        # One plain call: billed at the plan's standard multiplier, whatever mode its turns run.
        mode=AIMode.STANDARD,
        purpose=UsagePurpose.INSIGHTS,
        token_cap=int(settings.INSIGHTS_TOKEN_CAP) or None,
    )
    days = max(1, round((until - since) / timedelta(days=1)))
    messages = insights_step.prompt(
        client_name=client.name,
        days=days,
        items="\n".join(_line(item, refs[item.conversation]) for item in chosen),
        known=_known_faqs(client),
        min_count=int(settings.INSIGHTS_MIN_COUNT),
        max_topics=int(settings.INSIGHTS_MAX_TOPICS),
    )
    try:
        result = meter.call(
            step="insights",
            messages=messages,
            output=InsightsOut,
            hint=insights_step.hint(
                items=[item.as_hint(refs[item.conversation]) for item in chosen],
                min_count=int(settings.INSIGHTS_MIN_COUNT),
                max_topics=int(settings.INSIGHTS_MAX_TOPICS),
            ),
        )
    except (LLMError, UsageLimitReached, TokenCapExceeded) as exc:
        if isinstance(exc, LLMError):
            run.model = exc.model
            _spent(run, meter, exc.prompt_tokens, exc.completion_tokens)
        return InsightsResult(run=_fail(run, _why(exc), dry_run=dry_run))
    _spent(run, meter, result.prompt_tokens, result.completion_tokens)
    _step(run, 2, dry_run=dry_run)

    topics = _validated(result.parsed, chosen, refs, run)
    proposals = _store(client=client, run=run, topics=topics, dry_run=dry_run)
    return InsightsResult(run=_finish(run, dry_run=dry_run), proposals=proposals)


def _claim_run(
    *, client: Client, since: datetime, until: datetime, dry_run: bool
) -> InsightRun | None:
    """The run to work on, or None when this window is done or another worker is on it."""
    if dry_run:
        return InsightRun(client=client, window_start=since, window_end=until)
    stale = timezone.now() - timedelta(seconds=int(settings.INSIGHTS_RUN_STALE_SECONDS))
    with transaction.atomic():
        try:
            with transaction.atomic():
                run, created = InsightRun.objects.get_or_create(
                    client=client, window_start=since, window_end=until
                )
        except IntegrityError:  # created by a concurrent worker a moment ago
            created = False
            run = InsightRun.objects.for_client(client).get(window_start=since, window_end=until)
        run = InsightRun.objects.for_client(client).select_for_update().get(pk=run.pk)
        if not created:
            if run.status == RunStatus.DONE:
                return None
            if run.status == RunStatus.RUNNING and run.started_at and run.started_at > stale:
                return None
        run.status = RunStatus.RUNNING
        run.started_at = timezone.now()
        run.error = ""
        run.save(update_fields=["status", "started_at", "error", "updated_at"])
    return run


def _step(run: InsightRun, done: int, *, dry_run: bool) -> None:
    """Record progress, so the admin's status block shows how far a run got."""
    run.steps_done = done
    if not dry_run:
        run.save()


def _spent(run: InsightRun, meter: Meter, prompt_tokens: int, completion_tokens: int) -> None:
    run.llm_calls += meter.calls
    run.prompt_tokens += prompt_tokens
    run.completion_tokens += completion_tokens
    run.model = meter.model or run.model


def _why(exc: Exception) -> str:
    if isinstance(exc, UsageLimitReached):
        return f"usage limit: {exc.detail} — no model call was made"
    if isinstance(exc, TokenCapExceeded):
        return f"token cap: {exc.detail}"
    if isinstance(exc, LLMError):
        return f"model call failed ({exc.kind}): {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def _finish(run: InsightRun, *, dry_run: bool) -> InsightRun:
    return _end(run, dry_run=dry_run, status=RunStatus.DONE, steps_done=RUN_STEPS)


def _fail(run: InsightRun, error: str, *, dry_run: bool) -> InsightRun:
    logger.warning("insights run for client %s failed: %s", run.client_id, error)
    return _end(run, dry_run=dry_run, status=RunStatus.FAILED, error=error)


def _end(run: InsightRun, *, dry_run: bool, **outcome: Any) -> InsightRun:
    """The run, ended now with `outcome` (saved unless it is a dry run)."""
    for name, value in outcome.items():
        setattr(run, name, value)
    run.finished_at = timezone.now()
    if not dry_run:
        run.save()
    return run


# -- "Run insights now" ------------------------------------------------------------------------


def insights_run_now(*, client: Client, actor: Any = None, days: int | None = None) -> InsightRun:
    """Queue the nightly analysis for `client` over the last `days` (INSIGHTS_DAYS) up to now,
    today so far included, on the background queue. At most one such run in flight per client
    (one older than INSIGHTS_RUN_STALE_SECONDS counts as abandoned); the nightly job's bounds
    apply (INSIGHTS_MAX_INPUT_TOKENS on what is sent, INSIGHTS_TOKEN_CAP on the call)."""
    from apps.insights.tasks import run_now  # the task module imports this one

    days = int(days or settings.INSIGHTS_DAYS)
    if days < 1:
        raise ApplicationError(_("Choose at least one day."))
    now = timezone.now()
    stale = now - timedelta(seconds=int(settings.INSIGHTS_RUN_STALE_SECONDS))
    with transaction.atomic():
        # The client row is the lock: two clicks at once cannot both pass the check below.
        Client.objects.select_for_update().filter(pk=client.pk).first()
        in_flight = (
            InsightRun.objects.for_client(client)
            .filter(
                on_demand=True,
                status__in=[RunStatus.QUEUED, RunStatus.RUNNING],
                updated_at__gt=stale,
            )
            .exists()
        )
        if in_flight:
            raise ApplicationError(
                _("Insights are already running for %(client)s: wait for that run to finish.")
                % {"client": client.name}
            )
        run = InsightRun.objects.create(
            client=client,
            window_start=now - timedelta(days=days),
            window_end=now,
            status=RunStatus.QUEUED,
            on_demand=True,
            requested_by=_user(actor),
        )
        transaction.on_commit(
            lambda: run_now.apply_async(
                kwargs={"client_id": client.pk, "run_id": run.pk},
                queue=settings.BACKGROUND_QUEUE,
            )
        )
    return run


def insights_run_queued(*, client: Client, run_id: int) -> InsightRun:
    """Do a queued "Run insights now" run. Whatever goes wrong, the run ends failed with the
    reason, never stuck as queued or running."""
    run = InsightRun.objects.for_client(client).get(pk=run_id)
    if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
        return run  # done or failed already: a redelivered task does nothing
    try:
        result = generate_insights(client=client, since=run.window_start, until=run.window_end)
    except Exception as exc:
        logger.exception("insights run now failed for client %s", client.pk)
        run.refresh_from_db()
        return _fail(run, _why(exc), dry_run=False)
    return result.run


# -- the model's input: compact, bounded ---------------------------------------------------------


def _refs(evidence: list[Evidence]) -> dict[str, str]:
    """Conversation public id → the short id sent to the model (8 hex digits, longer when two
    conversations of the run share a prefix)."""
    ids = sorted({item.conversation for item in evidence})
    length = REF_LENGTH
    while len({i.replace("-", "")[:length] for i in ids}) < len(ids):
        length += 4
    return {i: i.replace("-", "")[:length] for i in ids}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _line(item: Evidence, ref: str) -> str:
    limit = int(settings.INSIGHTS_ITEM_CHARS)
    words = _clip(item.text, limit) or "(no customer message)"
    return f"[{ref}] {item.kind} | {_clip(item.detail, limit // 2)} | {words}"


def _bounded(evidence: list[Evidence], refs: dict[str, str]) -> tuple[list[Evidence], int]:
    """The newest items whose lines fit INSIGHTS_MAX_INPUT_TOKENS; and how many were left out."""
    budget = int(settings.INSIGHTS_MAX_INPUT_TOKENS)
    chosen: list[Evidence] = []
    used = 0
    for item in evidence:
        cost = estimate_tokens(_line(item, refs[item.conversation])) + 1
        if used + cost > budget:
            break
        chosen.append(item)
        used += cost
    return chosen, len(evidence) - len(chosen)


def _known_faqs(client: Client) -> str:
    faqs = business_info_for(client).get("faqs") or []
    questions = [f"- {_clip(str(f.get('question', '')), 120)}" for f in faqs]
    return "FAQ questions:\n" + "\n".join(questions[:50]) if questions else ""


# -- the model's output: validated, never trusted ------------------------------------------------


@dataclass
class _Topic:
    title: str
    key: str
    kind: str
    conversations: list[str]  # public ids, newest evidence first
    newest: datetime
    question: str = ""
    answer: str = ""
    note_type: str = ""
    content: str = ""
    questions: list[str] = field(default_factory=list)
    outline: str = ""


def topic_key(title: str) -> str:
    text = unicodedata.normalize("NFKC", title).casefold()
    return " ".join(re.findall(r"\w+", text))[:200]


def _validated(
    out: InsightsOut, chosen: list[Evidence], refs: dict[str, str], run: InsightRun
) -> list[_Topic]:
    """Keep only what the data supports: conversation ids among those sent (others — invented,
    or another tenant's — are dropped and counted), the count recomputed as the number of those
    conversations, proposals with the fields their kind needs, at least INSIGHTS_MIN_COUNT."""
    by_ref: dict[str, str] = {}
    newest: dict[str, datetime] = {}
    # Conversations that show a knowledge gap: a search that found nothing useful, or a turn
    # that searched the knowledge base and still went wrong.
    gaps = {item.conversation for item in chosen if item.kind == "no_knowledge" or item.searched}
    for item in chosen:
        ref = refs[item.conversation]
        by_ref[ref] = item.conversation
        by_ref[item.conversation] = item.conversation  # the full id, if the model used that
        newest[item.conversation] = max(newest.get(item.conversation, item.at), item.at)
    minimum = max(1, int(settings.INSIGHTS_MIN_COUNT))
    topics: list[_Topic] = []
    keys: set[tuple[str, str]] = set()
    run.topics = len(out.topics)
    for topic in out.topics[: int(settings.INSIGHTS_MAX_TOPICS)]:
        ids: list[str] = []
        for raw in topic.conversation_ids:
            public = by_ref.get(raw.strip().lower())
            if public is None:
                run.ids_dropped += 1
            elif public not in ids:
                ids.append(public)
        made = _proposal_fields(topic)
        key = topic_key(topic.title)
        if len(ids) < minimum or made is None or not key or (made["kind"], key) in keys:
            continue
        keys.add((made["kind"], key))
        ids.sort(key=lambda public: newest[public], reverse=True)
        if made["kind"] == ProposalKind.FAQ and gaps.intersection(ids):
            # The knowledge base was searched and did not have it: an article is missing.
            questions = _questions(chosen, ids)
            made = {
                "kind": ProposalKind.ARTICLE,
                "question": made["question"],
                "answer": made["answer"],
                "questions": questions,
                "outline": draft_outline(
                    title=_clip(topic.title, 200), questions=questions, answer=made["answer"]
                ),
            }
            if (made["kind"], key) in keys:
                continue
            keys.add((made["kind"], key))
        topics.append(
            _Topic(
                title=_clip(topic.title, 200),
                key=key,
                conversations=ids,
                newest=newest[ids[0]],
                **made,
            )
        )
    return topics


def _questions(chosen: list[Evidence], ids: list[str]) -> list[str]:
    """The customers' own words in the topic's conversations (newest first, distinct)."""
    wanted = set(ids)
    seen: dict[str, str] = {}
    for item in chosen:
        if item.conversation in wanted and item.kind != "failure_note":
            text = _clip(item.text, 300)
            if text and topic_key(text) not in seen:
                seen[topic_key(text)] = text
    return list(seen.values())[:MAX_GAP_QUESTIONS]


def draft_outline(*, title: str, questions: list[str], answer: str) -> str:
    """A Markdown draft for staff to write the missing article from: the model's draft answer
    (to check against the policies), placeholders for what a help article usually covers, and
    what customers asked. The placeholders keep it from being published unedited."""
    asked = "\n".join(f"- {q}" for q in questions) or "- (see the example conversations)"
    draft = answer.strip() or "[Write the answer: what applies, and to whom.]"
    return (
        f"{draft}\n\n"
        "## Details\n[Conditions, costs, times and exceptions that apply.]\n\n"
        "## Steps\n[What the customer does, step by step, if anything.]\n\n"
        "## Customers asked\n[Remove this section before publishing.]\n"
        f"{asked}\n"
    )


def _proposal_fields(topic: InsightTopicOut) -> dict[str, Any] | None:
    proposal = topic.proposal
    if proposal.kind == ProposalKind.FAQ:
        if not (proposal.question and proposal.answer):
            return None
        return {
            "kind": ProposalKind.FAQ,
            "question": _clip(proposal.question, 1000),
            "answer": proposal.answer[:5000],
        }
    if proposal.kind == ProposalKind.NOTE:
        if not proposal.content or proposal.note_type not in NoteType.values:
            return None
        return {
            "kind": ProposalKind.NOTE,
            "note_type": proposal.note_type,
            "content": proposal.content[:MAX_NOTE_CHARS],
        }
    return None


def _store(
    *, client: Client, run: InsightRun, topics: list[_Topic], dry_run: bool
) -> list[InsightProposal]:
    """One pending proposal per topic. A topic that already has one gets this run's evidence
    added (no duplicate); a topic staff already decided is proposed again only from evidence
    newer than their decision."""
    stored: list[InsightProposal] = []
    for topic in topics:
        if dry_run:
            stored.append(_new_proposal(client, run, topic, topic.conversations))
            continue
        with transaction.atomic():
            proposal = _store_one(client=client, run=run, topic=topic)
        if proposal is not None:
            stored.append(proposal)
    return stored


def _new_proposal(
    client: Client, run: InsightRun, topic: _Topic, conversations: list[str]
) -> InsightProposal:
    return InsightProposal(
        client=client,
        run=run if run.pk else None,
        kind=topic.kind,
        title=topic.title,
        topic_key=topic.key,
        count=len(conversations),
        conversation_ids=conversations,
        question=topic.question,
        answer=topic.answer,
        note_type=topic.note_type,
        content=topic.content,
        questions=topic.questions,
        outline=topic.outline,
    )


def _store_one(*, client: Client, run: InsightRun, topic: _Topic) -> InsightProposal | None:
    same = InsightProposal.objects.for_client(client).filter(kind=topic.kind, topic_key=topic.key)
    pending = same.filter(status=ProposalStatus.PENDING_REVIEW).select_for_update().first()
    if pending is not None:
        merged = list(dict.fromkeys([*topic.conversations, *pending.conversation_ids]))
        if merged != pending.conversation_ids:
            pending.conversation_ids = merged
            pending.count = len(merged)
            pending.run = run
            asked = {topic_key(q): q for q in [*pending.questions, *topic.questions]}
            pending.questions = list(asked.values())[:MAX_GAP_QUESTIONS]
            pending.save(
                update_fields=["conversation_ids", "count", "run", "questions", "updated_at"]
            )
            run.proposals_updated += 1
        return pending
    decided = same.exclude(reviewed_at=None).order_by("-reviewed_at").first()
    conversations = topic.conversations
    if decided is not None and decided.reviewed_at is not None:
        seen = set(decided.conversation_ids)
        conversations = [c for c in conversations if c not in seen]
        if topic.newest <= decided.reviewed_at or len(conversations) < int(
            settings.INSIGHTS_MIN_COUNT
        ):
            return None
    proposal = _new_proposal(client, run, topic, conversations)
    if topic.kind == ProposalKind.NOTE:
        # The note itself, waiting for review (it reaches no prompt while pending). The notes
        # service deduplicates: the same note already active, or rejected before, is no news.
        note = note_add(
            client=client,
            type=topic.note_type,
            content=topic.content,
            source=NoteSource.INSIGHT,
            status=NoteStatus.PENDING_REVIEW,
        )
        if note.status != NoteStatus.PENDING_REVIEW:
            return None
        proposal.note = note
    proposal.save()
    run.proposals_created += 1
    return proposal


# -- review ------------------------------------------------------------------------------------


def _locked(client: Client, proposal: InsightProposal) -> InsightProposal:
    locked = (
        InsightProposal.objects.for_client(client)
        .select_for_update()
        .filter(pk=proposal.pk)
        .first()
    )
    if locked is None:
        raise ApplicationError("No such proposal.", status=404, code="not_found")
    if locked.status != ProposalStatus.PENDING_REVIEW:
        raise ApplicationError(
            f"This proposal was already {locked.get_status_display().lower()}.",
            code="already_reviewed",
        )
    return locked


@transaction.atomic
def proposal_approve(
    *,
    client: Client,
    proposal: InsightProposal,
    actor: Any = None,
    question: str | None = None,
    answer: str | None = None,
    content: str | None = None,
) -> InsightProposal:
    """Approve a pending proposal. An FAQ (with the reviewer's edits, if any) becomes a
    published FAQ article — validated as every article is, refused with the field's error
    otherwise, and refused while the draft still holds a `[placeholder]`. A missing article's
    draft (`proposal_draft_article`, edited by staff) is published — refused while there is
    none or it still holds a `[placeholder]`. A note proposal's note becomes active."""
    locked = _locked(client, proposal)
    if locked.kind == ProposalKind.FAQ:
        locked.question = (question if question is not None else locked.question).strip()
        locked.answer = (answer if answer is not None else locked.answer).strip()
        _faq_add(client=client, question=locked.question, answer=locked.answer, actor=actor)
    elif locked.kind == ProposalKind.ARTICLE:
        _article_publish(client=client, proposal=locked, actor=actor)
    else:
        if content is not None:
            locked.content = content.strip()
        _note_activate(client=client, proposal=locked, actor=actor)
    locked.status = ProposalStatus.APPROVED
    locked.reviewed_by = actor if getattr(actor, "pk", None) else None
    locked.reviewed_at = timezone.now()
    locked.save()
    proposal.__dict__.update({k: v for k, v in locked.__dict__.items() if k != "_state"})
    return locked


@transaction.atomic
def proposal_reject(
    *, client: Client, proposal: InsightProposal, actor: Any = None, comment: str = ""
) -> InsightProposal:
    """Reject a pending proposal: nothing changes anywhere else (a note proposal's note is
    rejected: archived, and not proposed again), and the topic is proposed again only from
    newer evidence."""
    locked = _locked(client, proposal)
    if locked.kind == ProposalKind.NOTE:
        note = _proposal_note(client, locked)
        if note is not None and note.status == NoteStatus.PENDING_REVIEW:
            note_set_status(note=note, status="reject", by=_user(actor))
    locked.status = ProposalStatus.REJECTED
    locked.reviewed_by = actor if getattr(actor, "pk", None) else None
    locked.reviewed_at = timezone.now()
    locked.review_comment = comment[:2000]
    locked.save()
    proposal.__dict__.update({k: v for k, v in locked.__dict__.items() if k != "_state"})
    return locked


_PLACEHOLDER_MESSAGES = {
    "answer": gettext_lazy(
        "The draft answer still has a [placeholder] for staff to fill in: write the answer "
        "before approving."
    ),
    "article": gettext_lazy(
        "The draft article still has a [placeholder] for staff to fill in: write the article "
        "before approving."
    ),
}


def _placeholder_error(text: str, field_name: str) -> ApplicationError | None:
    if PLACEHOLDER.search(text):
        message = str(_PLACEHOLDER_MESSAGES[field_name])
        return ApplicationError(message, {"fields": {field_name: message}})
    return None


def _legacy_faqs_to_articles(client: Client) -> None:
    """A client whose business info still carries its own `faqs` (not migrated yet) gets them
    as FAQ articles first — otherwise that list would hide every FAQ article from prompts
    (`business_info_for`)."""
    locked = Client.objects.select_for_update().get(pk=client.pk)
    info = dict(locked.business_info) if isinstance(locked.business_info, dict) else {}
    if "faqs" not in info:
        return
    existing = {
        topic_key(title)
        for title in Article.objects.for_client(client)
        .filter(kind=ArticleKind.FAQ)
        .values_list("title", flat=True)
    }
    for faq in info.pop("faqs") or []:
        question = str(faq.get("question", "")).strip() if isinstance(faq, dict) else ""
        answer = str(faq.get("answer", "")).strip() if isinstance(faq, dict) else ""
        if question and answer and topic_key(question) not in existing:
            existing.add(topic_key(question))
            article_save(
                article=Article(
                    client=client,
                    kind=ArticleKind.FAQ,
                    title=question,
                    body=answer,
                    language=client.language,
                )
            )
    locked.business_info = info
    locked.save(update_fields=["business_info", "updated_at"])
    client.business_info = info


def _faq_add(*, client: Client, question: str, answer: str, actor: Any = None) -> Article:
    """A published FAQ article (title = the question, body = the answer)."""
    fields: dict[str, str] = {}
    placeholder = _placeholder_error(answer, "answer")
    if placeholder is not None:
        fields.update(placeholder.extra["fields"])
    if not question:
        fields["question"] = "Must not be empty."
    if not answer:
        fields["answer"] = "Must not be empty."
    if fields:
        raise ApplicationError(
            "The FAQ cannot be added: "
            + "; ".join(f"{name}: {message}" for name, message in fields.items()),
            {"fields": fields},
        )
    _legacy_faqs_to_articles(client)
    wanted = topic_key(question)
    faqs = Article.objects.for_client(client).filter(kind=ArticleKind.FAQ)
    titles = faqs.values_list("title", flat=True)
    if any(topic_key(title) == wanted for title in titles):
        raise ApplicationError(
            "The FAQ cannot be added: there is already an FAQ with this question.",
            {"fields": {"question": "Already among the FAQs."}},
        )
    article = Article(
        client=client,
        kind=ArticleKind.FAQ,
        status=ArticleStatus.PUBLISHED,
        title=question,
        body=answer,
        language=client.language,
        approved_by=_user(actor),
        approved_at=timezone.now(),
    )
    try:
        return article_save(article=article, user=_user(actor))
    except ApplicationError as exc:
        named = {"title": "question", "body": "answer"}
        errors = (exc.extra or {}).get("fields") or {}
        raise ApplicationError(
            f"The FAQ cannot be added: {exc.message}",
            {"fields": {named.get(k, k): v for k, v in errors.items()}},
        ) from None


def _proposal_article(client: Client, proposal: InsightProposal) -> Article | None:
    if proposal.article_id is None:
        return None
    return (
        Article.objects.for_client(client)
        .select_for_update()
        .filter(pk=proposal.article_id)
        .first()
    )


@transaction.atomic
def proposal_draft_article(
    *, client: Client, proposal: InsightProposal, actor: Any = None
) -> Article:
    """Make the DRAFT article of a pending missing-article proposal from its outline (once:
    asked again, the existing draft is returned). A draft reaches no prompt; staff write it in
    the knowledge admin, then approving the proposal publishes it."""
    locked = _locked(client, proposal)
    if locked.kind != ProposalKind.ARTICLE:
        raise ApplicationError(
            _("Only a missing-article proposal drafts an article."), code="not_an_article"
        )
    article = _proposal_article(client, locked)
    if article is not None:
        return article
    article = article_save(
        article=Article(
            client=client,
            kind=ArticleKind.ARTICLE,
            status=ArticleStatus.DRAFT,
            title=locked.title,
            body=locked.outline
            or draft_outline(title=locked.title, questions=locked.questions, answer=locked.answer),
            language=client.language,
            tags=[GAP_TAG],
        ),
        user=_user(actor),
    )
    locked.article = article
    locked.save(update_fields=["article", "updated_at"])
    proposal.article = article
    return article


def _article_publish(*, client: Client, proposal: InsightProposal, actor: Any) -> None:
    article = _proposal_article(client, proposal)
    if article is None:
        raise ApplicationError(
            _(
                "Draft the article first (Draft article), write it in the knowledge admin, "
                "then approve."
            ),
            {"fields": {"article": _("No draft article yet.")}},
            code="no_draft",
        )
    placeholder = _placeholder_error(article.body, "article")
    if placeholder is not None:
        raise placeholder
    article_publish(article=article, user=_user(actor))


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "pk", None) else None


def _proposal_note(client: Client, proposal: InsightProposal) -> Any:
    from apps.notes.models import Note

    if proposal.note_id is None:
        return None
    return Note.objects.for_client(client).select_for_update().filter(pk=proposal.note_id).first()


def _note_activate(*, client: Client, proposal: InsightProposal, actor: Any) -> None:
    """The proposal's note (with the reviewer's edit, if any) becomes active."""
    note = _proposal_note(client, proposal)
    if note is None:
        raise ApplicationError(
            "The proposal's note no longer exists (deleted in the notes admin): reject it.",
            code="note_missing",
        )
    if note.status == NoteStatus.ARCHIVED:
        raise ApplicationError(
            "The proposal's note was archived in the notes admin: reject the proposal.",
            code="note_archived",
        )
    if proposal.content and proposal.content != note.content:
        note_update(note=note, content=proposal.content)
    if note.status != NoteStatus.ACTIVE:
        note_set_status(note=note, status=NoteStatus.ACTIVE, by=_user(actor))
