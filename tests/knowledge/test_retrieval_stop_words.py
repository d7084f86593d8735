"""A question's grammar words ("do", "I", "where", "¿dónde", "wie") do not decide what it finds:
the query drops its language's stop words (apps/knowledge/stopwords/), and the demo help
centre's evaluation set reaches recall@5 ≥ 0.95 on this database (SQLite here, PostgreSQL in
CI)."""

from __future__ import annotations

from collections import Counter

import pytest

from apps.core.languages import SHIPPED
from apps.knowledge import retrieval
from apps.knowledge.models import Article, ArticleStatus
from apps.knowledge.services.indexing import article_index
from devtools.benchmarks.retrieval import run_retrieval_benchmark
from tests.factories import ClientFactory

# One question per shipped language: its grammar words go, its subject stays.
QUESTIONS = {
    "en": ("where do I get a return label", {"get", "return", "label"}),
    "es": ("¿dónde puedo conseguir una etiqueta de devolución?", {"conseguir", "etiqueta"}),
    "de": ("wo bekomme ich ein Rücksendeetikett", {"bekomme", "rücksendeetikett"}),
    "fr": ("où est-ce que je peux avoir une étiquette de retour", {"étiquette", "retour"}),
    "it": ("dove posso avere un'etichetta per il reso", {"etichetta", "reso"}),
    "nl": ("waar krijg ik een retourlabel", {"krijg", "retourlabel"}),
    "pt": ("onde posso obter uma etiqueta de devolução", {"obter", "etiqueta", "devolução"}),
    "ar": ("كيف أحصل على ملصق الإرجاع", {"أحصل", "ملصق", "الإرجاع"}),
    "he": ("איפה אני מקבל תווית החזרה", {"תווית", "החזרה"}),
}


def test_every_shipped_language_has_stop_words() -> None:
    for code in SHIPPED:
        assert len(retrieval.stop_words(code)) >= 40, code
    assert retrieval.stop_words("pt-BR") == retrieval.stop_words("pt")
    assert retrieval.stop_words("xx") == frozenset()
    assert retrieval.stop_words("../en") == frozenset()


@pytest.mark.parametrize("language", sorted(QUESTIONS))
def test_a_question_keeps_its_subject_and_drops_its_grammar_words(language: str) -> None:
    question, subject = QUESTIONS[language]
    terms = retrieval.query_terms(question, language)
    assert subject <= set(terms), terms
    assert len(terms) < len(retrieval.query_terms(question)), terms


def test_a_question_of_grammar_words_only_keeps_them() -> None:
    assert retrieval.query_terms("what is it?", "en") == ["what", "is", "it"]
    assert retrieval.query_terms("where do I get a return label") == [
        "where", "do", "i", "get", "a", "return", "label"
    ]  # fmt: skip


@pytest.mark.django_db
def test_a_short_chunk_of_grammar_words_does_not_outrank_the_subject() -> None:
    client = ClientFactory(language="en")
    for title, body in (
        (
            "Visiting our showroom",
            "## What you can do there\nWhere I get advice: do drop in, and I will help you.",
        ),
        (
            "Starting a return",
            "Open the Returns page and choose the items. Print the prepaid return label and "
            "stick it on the parcel; the carrier scans it at drop-off. Refunds follow the "
            "inspection of the parcel at our warehouse, within five business days.",
        ),
    ):
        article = Article(client=client, title=title, body=body, status=ArticleStatus.PUBLISHED)
        article.refresh_hash()
        article.save()
        article_index(article=article)
    hits = retrieval.search(client=client, query="where do I get a return label", language="en")
    assert hits[0].title == "Starting a return"


@pytest.mark.django_db
def test_the_demo_help_centre_reaches_recall_at_5_of_095() -> None:
    result = run_retrieval_benchmark(in_current_database=True)
    overall = result.overall
    assert overall.recall(5) >= 0.95, [(m.question, m.expected, m.rank) for m in result.misses]
    assert overall.mrr >= 0.75  # 0.737 (PostgreSQL) and 0.748 (SQLite) before
    # No article answers everything: the most frequent first hit is first for few questions.
    firsts = Counter(m.top[0] for m in result.misses if m.top)
    assert not firsts or firsts.most_common(1)[0][1] <= 2
