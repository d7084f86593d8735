"""The retrieval evaluation behind `manage.py bench_retrieval`: recall@1/@3/@5 and MRR of the
demo help centre's evaluation set (demo/knowledge/eval.json) against the real search.

It loads every article of demo/knowledge/ (Markdown with YAML front matter: title, tags,
language) into a fresh client of a temporary database (Django's test-database machinery, so the
configured database is never written to), saves each through the knowledge services (validated,
hashed and indexed by `article_index`, as staff edits are), then runs every question through
`apps.knowledge.selectors.search_chunks` — the same call the assistant's retrieval makes.

Scoring is by article: the chunks returned are collapsed into distinct articles in rank order,
and a question counts as a hit at k when the article the set names is among the top k of them.
MRR is the mean of 1/rank of that article within the top `MRR_DEPTH` distinct articles (0 when
it is not there). Full-text search alone unless `embeddings=True`, which needs EMBEDDING_MODEL
and a provider.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from apps.clients.models import AIMode, Client, Plan
from apps.core.exceptions import ApplicationError
from apps.knowledge.models import Article, ArticleChunk, ArticleKind, ArticleStatus
from apps.knowledge.selectors import search_chunks
from apps.knowledge.services.articles import article_save
from apps.provisioning.files import parse_article_text
from apps.reasoning.knowledge import HITS_PER_FETCH
from devtools.benchmarks.modes import BenchmarkError, temporary_database

DEMO_KNOWLEDGE = Path(settings.BASE_DIR) / "demo" / "knowledge"
EVAL_FILE = DEMO_KNOWLEDGE / "eval.json"
KS = (1, 3, 5)
MRR_DEPTH = 10
# Chunks asked of the search per question: enough to fill MRR_DEPTH distinct articles when an
# article contributes several chunks.
CHUNKS_ASKED = 40
# The relevance cuts measured on the fetch a turn makes (`retrieval.search` with the fetch's
# limit and standard/deliberative budget; docs/knowledge.md, "Relevance cut").
CUT_SHARES = (0.0, 0.3, 0.4, 0.5, 0.6)


# -- the demo files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoArticle:
    slug: str  # the file name without .md
    title: str
    body: str
    tags: list[str]
    language: str


@dataclass(frozen=True)
class EvalQuestion:
    question: str
    article: str  # the slug of the article that answers it
    language: str


def parse_article(text: str, *, slug: str) -> DemoArticle:
    """One Markdown file with YAML front matter, read by the tenant file's own rule
    (`apps.provisioning.files.parse_article_text`: what `make demo` imports)."""
    try:
        article = parse_article_text(text, label=f"{slug}.md", where="article_dir")
    except ApplicationError as exc:
        raise BenchmarkError(str(exc)) from None
    return DemoArticle(
        slug=slug,
        title=str(article["title"]).strip(),
        body=str(article["body"]),
        tags=[str(t) for t in article.get("tags") or []],
        language=str(article.get("language") or "").strip(),
    )


def articles_load_dir(path: Path = DEMO_KNOWLEDGE) -> list[DemoArticle]:
    """Every `*.md` of `path`, in file-name order."""
    return [
        parse_article(file.read_text(encoding="utf-8"), slug=file.stem)
        for file in sorted(path.glob("*.md"))
    ]


def eval_load(path: Path = EVAL_FILE) -> list[EvalQuestion]:
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [
        EvalQuestion(question=r["question"], article=r["article"], language=r.get("language", ""))
        for r in rows
    ]


def evenly(items: list[Any], count: int | None) -> list[Any]:
    """`count` items spread over `items` (all of them when count is None or too large)."""
    if count is None or count >= len(items):
        return list(items)
    if count < 1:
        return []
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


# -- the figures ---------------------------------------------------------------------------------


@dataclass
class Figures:
    questions: int = 0
    hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    reciprocal_ranks: Decimal = Decimal(0)

    def add(self, rank: int | None) -> None:
        self.questions += 1
        for k in KS:
            if rank is not None and rank <= k:
                self.hits[k] += 1
        if rank is not None and rank <= MRR_DEPTH:
            self.reciprocal_ranks += Decimal(1) / Decimal(rank)

    def recall(self, k: int) -> float:
        return self.hits[k] / self.questions if self.questions else 0.0

    @property
    def mrr(self) -> float:
        return float(self.reciprocal_ranks / self.questions) if self.questions else 0.0


@dataclass(frozen=True)
class Miss:
    question: str
    expected: str
    language: str
    rank: int | None  # the expected article's rank among distinct articles (None: not found)
    top: list[str]  # the top 5 distinct articles returned (slugs)


@dataclass
class RetrievalResult:
    vendor: str
    embeddings: bool
    articles: int
    chunks: int
    overall: Figures = field(default_factory=Figures)
    by_language: dict[str, Figures] = field(default_factory=dict)
    misses: list[Miss] = field(default_factory=list)
    seconds: float = 0.0
    # share → [questions whose article is in the fetch, chunks, tokens] over all questions
    cuts: dict[float, list[int]] = field(default_factory=dict)


def _ranked_slugs(hits: Iterable[Any], slugs: dict[int, str]) -> list[str]:
    """The distinct articles of `hits` (chunks or retrieval hits, best first), as slugs."""
    seen: list[str] = []
    for hit in hits:
        slug = slugs.get(int(hit.article_id), f"#{hit.article_id}")
        if slug not in seen:
            seen.append(slug)
    return seen


# -- the run -------------------------------------------------------------------------------------


def _fresh_client(token: str) -> Client:
    plan = Plan.objects.create(
        slug=f"bench-kb-{token}",
        name="Bench retrieval",
        ai_mode=AIMode.STANDARD,
        monthly_fee=Decimal("0"),
        included_turns=0,
    )
    return Client.objects.create(
        slug=f"bench-kb-{token}", name="Trailhead Outfitters (bench)", plan=plan, language="en"
    )


def _load(client: Client, articles: list[DemoArticle]) -> dict[int, str]:
    """Save (and so index) every demo article for `client`; article pk → slug."""
    slugs: dict[int, str] = {}
    for demo in articles:
        article = Article(
            client=client,
            kind=ArticleKind.ARTICLE,
            status=ArticleStatus.PUBLISHED,
            title=demo.title,
            body=demo.body,
            tags=demo.tags,
            language=demo.language,
        )
        article_save(article=article)
        slugs[article.pk] = demo.slug
    return slugs


def run_retrieval_benchmark(
    *,
    embeddings: bool = False,
    questions: int | None = None,
    in_current_database: bool = False,
    article_dir: Path = DEMO_KNOWLEDGE,
    eval_file: Path = EVAL_FILE,
    progress: Callable[[int], Any] | None = None,
) -> RetrievalResult:
    """Load the help centre into a fresh client, run the evaluation set (or `questions` of it,
    spread evenly) through the search and score it.

    By default everything happens in a temporary database that is dropped at the end;
    `in_current_database=True` (for the test suite) works in the current one and deletes the
    benchmark client afterwards."""
    model = str(settings.EMBEDDING_MODEL or "")
    if embeddings and not model:
        raise BenchmarkError(
            "--embeddings needs EMBEDDING_MODEL (and OPENAI_API_KEY / OPENAI_BASE_URL of a "
            "provider with /v1/embeddings)."
        )
    articles = articles_load_dir(article_dir)
    if not articles:
        raise BenchmarkError(f"No articles (*.md) in {article_dir}.")
    known = {a.slug for a in articles}
    asked = evenly(eval_load(eval_file), questions)
    unknown = sorted({q.article for q in asked} - known)
    if unknown:
        raise BenchmarkError(f"The evaluation set names articles that do not exist: {unknown}")

    database = nullcontext() if in_current_database else temporary_database()
    # Full-text alone unless embeddings are asked for: an EMBEDDING_MODEL in the environment
    # must not change what the full-text figures measure.
    overrides = {"EMBEDDING_MODEL": model if embeddings else ""}
    with database, override_settings(**overrides):
        client = _fresh_client(token=f"{int(time.time() * 1000)}")
        try:
            slugs = _load(client, articles)
            result = RetrievalResult(
                vendor=connection.vendor,
                embeddings=embeddings,
                articles=len(slugs),
                chunks=ArticleChunk.objects.for_client(client).count(),
            )
            started = time.perf_counter()
            for item in asked:
                hits = search_chunks(
                    client=client, query=item.question, language=item.language, limit=CHUNKS_ASKED
                )
                ranked = _ranked_slugs(hits, slugs)
                rank = ranked.index(item.article) + 1 if item.article in ranked else None
                result.overall.add(rank)
                result.by_language.setdefault(item.language or "?", Figures()).add(rank)
                if rank is None or rank > max(KS):
                    result.misses.append(
                        Miss(
                            question=item.question,
                            expected=item.article,
                            language=item.language,
                            rank=rank,
                            top=ranked[: max(KS)],
                        )
                    )
                if progress is not None:
                    progress(1)
            result.seconds = time.perf_counter() - started
            # Outside the timed loop: `seconds` is the ranking searches' own time.
            for item in asked:
                _measure_cuts(result, client, item, slugs)
        finally:
            if in_current_database:
                plan_id = client.plan_id
                Client.objects.filter(pk=client.pk).delete()
                Plan.objects.filter(pk=plan_id).delete()
    return result


def _measure_cuts(
    result: RetrievalResult, client: Client, item: EvalQuestion, slugs: dict[int, str]
) -> None:
    """The fetch a turn makes for the question (5 chunks within the standard budget), once per
    relevance cut: is the answering article still in it, and how many chunks and tokens."""
    for share in CUT_SHARES:
        hits = search_chunks(
            client=client,
            query=item.question,
            language=item.language,
            limit=HITS_PER_FETCH,
            token_budget=settings.REASONING_STANDARD_KB_TOKENS,
            min_share_of_best=share,
        )
        row = result.cuts.setdefault(share, [0, 0, 0])
        row[0] += any(slugs.get(h.article_id) == item.article for h in hits)
        row[1] += len(hits)
        row[2] += sum(h.tokens for h in hits)


# -- the report ----------------------------------------------------------------------------------


def _row(label: str, figures: Figures) -> str:
    cells = [label, str(figures.questions)]
    cells += [f"{figures.recall(k):.2f}" for k in KS]
    cells.append(f"{figures.mrr:.3f}")
    return "| " + " | ".join(cells) + " |"


def markdown_report(result: RetrievalResult) -> str:
    search = "full text + embeddings" if result.embeddings else "full text only"
    lines = [
        f"{result.articles} articles, {result.chunks} chunks, {result.overall.questions} "
        f"questions — {result.vendor}, {search}",
        "",
        "| language | questions | recall@1 | recall@3 | recall@5 | MRR |",
        "|---|---|---|---|---|---|",
    ]
    for language in sorted(result.by_language):
        lines.append(_row(language, result.by_language[language]))
    lines.append(_row("all", result.overall))
    lines.append("")
    if result.misses:
        lines.append(f"Misses (expected article not in the top {max(KS)}):")
        for miss in result.misses:
            where = f"rank {miss.rank}" if miss.rank else "not found"
            got = ", ".join(miss.top) or "(nothing)"
            lines.append(f"- “{miss.question}” → {miss.expected} ({where}); got: {got}")
    else:
        lines.append(f"No misses: every expected article is in the top {max(KS)}.")
    if result.cuts:
        n = result.overall.questions or 1
        lines += [
            "",
            f"The fetch a turn makes ({HITS_PER_FETCH} chunks, "
            f"{settings.REASONING_STANDARD_KB_TOKENS} tokens), by relevance cut "
            "(chunks below the share × the best chunk's score left out):",
            "",
            "| cut | answering article kept | chunks / question | tokens / question |",
            "|---|---|---:|---:|",
        ]
        for share, (kept, chunks, tokens) in sorted(result.cuts.items()):
            lines.append(
                f"| {share:.1f} | {kept} / {result.overall.questions} | {chunks / n:.2f} "
                f"| {tokens / n:,.0f} |"
            )
    return "\n".join(lines)
