"""`manage.py bench_retrieval` on a subset of the evaluation set, and the demo help centre's
files: the shape the tenant file's article directory and the benchmark rely on."""

from __future__ import annotations

import itertools
import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.clients.models import Client
from apps.knowledge.models import Article
from devtools.benchmarks.modes import BenchmarkError
from devtools.benchmarks.retrieval import (
    CUT_SHARES,
    DEMO_KNOWLEDGE,
    EVAL_FILE,
    KS,
    articles_load_dir,
    eval_load,
    evenly,
    parse_article,
    run_retrieval_benchmark,
)


def test_the_demo_help_centre_is_complete_and_well_formed() -> None:
    articles = articles_load_dir()
    assert len(articles) >= 105
    assert len({a.title for a in articles}) == len(articles)  # titles are unique
    languages = [a.language for a in articles]
    assert set(languages) <= {"en", "es"}
    assert languages.count("es") >= 5
    for article in articles:
        words = len(article.body.split())
        assert 80 <= words <= 300, (article.slug, words)
        assert article.tags, article.slug
        assert article.slug == article.slug.lower() and " " not in article.slug


def test_the_evaluation_set_names_existing_articles_and_does_not_copy_titles() -> None:
    articles = {a.slug: a for a in articles_load_dir()}
    questions = eval_load()
    assert len(questions) >= 60
    assert {q.language for q in questions} == {"en", "es"}
    for q in questions:
        assert q.article in articles, q
        assert q.language == articles[q.article].language, q
        assert q.question.strip().casefold() != articles[q.article].title.casefold(), q
    rows = json.loads(EVAL_FILE.read_text(encoding="utf-8"))
    assert all(set(r) == {"question", "article", "language"} for r in rows)


def test_the_demo_tenant_points_at_the_help_centre() -> None:
    data = json.loads((DEMO_KNOWLEDGE.parent / "tenant.json").read_text(encoding="utf-8"))
    knowledge = data["clients"][0]["knowledge"]
    assert (DEMO_KNOWLEDGE.parent / knowledge["article_dir"]).resolve() == DEMO_KNOWLEDGE


def test_front_matter_is_required_and_parsed() -> None:
    article = parse_article(
        "---\ntitle: Returning an item\ntags: [returns, policy]\nlanguage: en\n---\nBody *md*\n",
        slug="returning",
    )
    assert (article.title, article.tags, article.language, article.body) == (
        "Returning an item",
        ["returns", "policy"],
        "en",
        "Body *md*",
    )
    with pytest.raises(BenchmarkError, match="front matter"):
        parse_article("# Just markdown\n", slug="plain")
    with pytest.raises(BenchmarkError, match="title"):
        parse_article("---\ntags: [a]\n---\nBody\n", slug="untitled")


def test_evenly_spreads_a_subset() -> None:
    assert evenly(list(range(10)), 5) == [0, 2, 4, 6, 8]
    assert evenly([1, 2], None) == [1, 2]
    assert evenly([1, 2], 7) == [1, 2]


@pytest.mark.django_db
def test_bench_retrieval_scores_a_subset_and_cleans_up(tmp_path: Path) -> None:
    out = StringIO()
    call_command(
        "bench_retrieval", questions=8, in_current_database=True, no_progress=True, stdout=out
    )
    text = out.getvalue()
    assert "| language | questions | recall@1 | recall@3 | recall@5 | MRR |" in text
    assert "| all | 8 |" in text
    assert not Client.objects.filter(slug__startswith="bench-kb-").exists()
    assert not Article.objects.unscoped("test checks the database directly").exists()


@pytest.mark.django_db
def test_the_figures_are_consistent_with_the_misses() -> None:
    result = run_retrieval_benchmark(questions=10, in_current_database=True)
    overall = result.overall
    assert overall.questions == 10 == sum(f.questions for f in result.by_language.values())
    assert result.articles >= 105 and result.chunks >= result.articles
    recalls = [overall.recall(k) for k in KS]
    assert recalls == sorted(recalls)  # recall@1 ≤ recall@3 ≤ recall@5
    assert overall.questions - overall.hits[max(KS)] == len(result.misses)
    assert overall.recall(1) <= overall.mrr <= 1
    for miss in result.misses:
        assert miss.expected not in miss.top and len(miss.top) <= max(KS)
    # The relevance cuts on the fetch a turn makes: a higher share keeps no more chunks, tokens
    # or answering articles than a lower one, and the cut-free fetch holds at most 5 chunks.
    rows = [result.cuts[share] for share in sorted(result.cuts)]
    assert sorted(result.cuts) == list(CUT_SHARES) and rows[0][1] <= 5 * 10
    for lower, higher in itertools.pairwise(rows):
        assert all(h <= lo for h, lo in zip(higher, lower, strict=True))
    assert rows[0][0] >= 1 and rows[0][2] > rows[-1][2]


def test_embeddings_need_a_model(settings) -> None:
    settings.EMBEDDING_MODEL = ""
    with pytest.raises(CommandError, match="EMBEDDING_MODEL"):
        call_command("bench_retrieval", embeddings=True, no_progress=True, stdout=StringIO())
