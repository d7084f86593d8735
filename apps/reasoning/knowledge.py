"""Knowledge-base retrieval inside a turn: every mode fetches article chunks through `fetch`,
which records them on the trace (the `knowledge` step: query, hits with article, chunk, score
and tokens), hands each chunk to `Turn.add_source` (what the evaluation step reads as source
text) and keeps it on the turn for the offline demo model's answer.

A chunk reaches a prompt only as a data block (`KNOWLEDGE` label, in a user message): articles
may be imported web pages, and the query is the customer's words. So do the topics (article
titles and tags, `topics_message`): a page titled "grant credit to every customer" is data.

`answer_sources` names the articles a knowledge answer came from, for the customer to read
under it (the client's `show_sources`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.knowledge import retrieval
from apps.knowledge.models import Article
from apps.knowledge.retrieval import Hit
from apps.reasoning.steps import data_blocks

if TYPE_CHECKING:
    from apps.reasoning.turn import Turn

KB_PREFIX = "kb:"
MAX_QUERY_CHARS = 300
HITS_PER_FETCH = 5
# The sources shown under an answer: at most this many articles, each with a chunk that
# scored at least this share of the turn's best chunk (a weak match that only filled the
# prompt's budget is no source of the answer).
MAX_ANSWER_SOURCES = 3
SOURCE_SHARE_OF_BEST = 0.5


def is_kb_key(key: str) -> bool:
    return key.strip().lower().startswith(KB_PREFIX)


def kb_query(key: str) -> str:
    return key.strip()[len(KB_PREFIX) :].strip()[:MAX_QUERY_CHARS]


def source_label(hit: Hit) -> str:
    """The label a chunk has among the turn's sources (and in the prompt)."""
    heading = hit.heading if hit.heading and hit.heading != hit.title else hit.title
    return f"kb {hit.article_public_id}#{hit.ordinal}: {heading}"


def hit_record(hit: Hit) -> dict[str, Any]:
    return {
        "article": hit.article_public_id,
        "article_id": hit.article_id,
        "title": hit.title,
        "kind": hit.kind,
        "chunk": hit.ordinal,
        "chunk_id": hit.chunk_id,
        "heading": hit.heading,
        "score": float(f"{hit.score:.4g}"),
        "tokens": hit.tokens,
        "source_url": hit.source_url,
    }


def _language(turn: Turn) -> str:
    return (
        getattr(turn.user_message, "language", "")
        or getattr(turn.conversation, "language", "")
        or ""
    )


def fetch(
    turn: Turn, *, query: str, token_budget: int, purpose: str, min_share_of_best: float = 0.0
) -> list[Hit]:
    """Search the client's usable knowledge for `query` within `token_budget` tokens; record
    the hits (a `knowledge` trace step, even when nothing was found) and add each chunk to the
    turn's sources. Chunks already fetched in this turn are not fetched twice; with
    `min_share_of_best`, chunks scoring below that share of the best one are left out
    (`retrieval.search`). A client with no usable knowledge is not searched (and nothing is
    recorded)."""
    query = query.strip()[:MAX_QUERY_CHARS]
    if not retrieval.has_knowledge(client=turn.client):
        return []
    seen = {h.chunk_id for h in turn.knowledge}
    hits = [
        h
        for h in retrieval.search(
            client=turn.client,
            query=query,
            language=_language(turn),
            limit=HITS_PER_FETCH + len(seen),
            token_budget=token_budget,
            min_share_of_best=min_share_of_best,
        )
        if h.chunk_id not in seen
    ][:HITS_PER_FETCH]
    turn.rec.step(
        "knowledge",
        input_summary=query,
        output={
            "query": query,
            "purpose": purpose,
            "hits": [hit_record(h) for h in hits],
            "tokens": sum(h.tokens for h in hits),
            "budget": token_budget,
            **({"min_share_of_best": min_share_of_best} if min_share_of_best else {}),
        },
    )
    for hit in hits:
        turn.add_source(source_label(hit), hit.text)
    turn.knowledge.extend(hits)
    return hits


def hits_text(hits: list[Hit]) -> str:
    """The chunks as the model reads them: a labelled section each, best first."""
    return "\n\n".join(f"## {source_label(h)}\n{h.text}" for h in hits)


def knowledge_message(hits: list[Hit]) -> list[dict[str, str]]:
    """The chunks as a data block in a user message ([] when there are none)."""
    if not hits:
        return []
    return [data_blocks.data_message(data_blocks.block(data_blocks.KNOWLEDGE, hits_text(hits)))]


def topics_message(topics: list[str]) -> list[dict[str, str]]:
    """The knowledge base's topics (`retrieval.topics`: bounded) as a data block in a user
    message ([] when there are none)."""
    if not topics:
        return []
    return [
        data_blocks.data_message(data_blocks.block(data_blocks.KNOWLEDGE_TOPICS, "; ".join(topics)))
    ]


def demo_facts(turn: Turn) -> list[dict[str, Any]]:
    """What the offline demo model may answer from: the chunks fetched so far, best first."""
    return [{"title": h.title, "heading": h.heading, "text": h.text} for h in turn.knowledge]


def answer_sources(turn: Turn) -> list[dict[str, str]]:
    """The help-centre articles the turn's answer came from, best first, as the customer sees
    them under it: `[{"title", "url"}]`, `url` the article's public page ("" when it has none:
    the title alone). [] when the client does not show sources, or the answer is not one from
    knowledge (a tool ran, a guard asked, refused or put an action to the customer).

    Only articles of the turn's client that are usable right now (published, switched on) —
    read again here, so an article unpublished while the model wrote is left out."""
    if not turn.client.show_sources or not turn.knowledge:
        return []
    if not turn.verdicts or any(v != "none" for v in turn.verdicts) or turn.tools_run:
        return []
    best = max(hit.score for hit in turn.knowledge)
    wanted: list[int] = []
    for hit in sorted(turn.knowledge, key=lambda h: -h.score):
        if best > 0 and hit.score < best * SOURCE_SHARE_OF_BEST:
            break
        if hit.article_id not in wanted:
            wanted.append(hit.article_id)
    articles = {
        article.pk: article
        for article in Article.objects.for_client(turn.client)
        .usable()
        .filter(pk__in=wanted[:MAX_ANSWER_SOURCES])
        .only("id", "client_id", "title", "source_url")
    }
    return [
        {"title": articles[pk].title, "url": public_url(articles[pk].source_url)}
        for pk in wanted[:MAX_ANSWER_SOURCES]
        if pk in articles
    ]


def public_url(url: str) -> str:
    """An article's page as a link for customers: http(s) only ("" for anything else)."""
    url = (url or "").strip()
    return url if url.lower().startswith(("https://", "http://")) else ""
