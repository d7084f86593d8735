"""Optional embeddings through the provider's OpenAI-compatible `/v1/embeddings`.

`EMBEDDING_MODEL` unset (the default): full-text search only, nothing here is called. Set, the
indexer fills each chunk's `embedding` after its article is saved (in batches of
`EMBEDDING_BATCH`) and search ranks by cosine similarity too, fused with the text ranking
(`apps.knowledge.retrieval`). The provider is the one the LLM gateway uses (`OPENAI_BASE_URL`,
`OPENAI_API_KEY`). A failed call never fails a save or a search: the chunk stays without an
embedding and is ranked by text alone."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import openai
from django.conf import settings

from apps.clients.models import Client
from apps.knowledge.models import ArticleChunk

logger = logging.getLogger(__name__)

EMBEDDING_INPUT_CHARS = 8000  # one chunk is ≤ ~1,400 characters; a query is cut to this


def enabled() -> bool:
    return bool(settings.EMBEDDING_MODEL) and bool(settings.OPENAI_API_KEY)


def model_name() -> str:
    return str(settings.EMBEDDING_MODEL)


def _sdk() -> openai.OpenAI:
    return openai.OpenAI(
        api_key=str(settings.OPENAI_API_KEY),
        base_url=settings.OPENAI_BASE_URL or None,
        timeout=float(settings.EMBEDDING_TIMEOUT),
        max_retries=0,
    )


def embed(texts: Sequence[str]) -> list[list[float]]:
    """One `/v1/embeddings` call: a vector per text, in order. Raises `openai.OpenAIError`
    (or ValueError on a malformed answer)."""
    response = _sdk().embeddings.create(
        model=model_name(), input=[t[:EMBEDDING_INPUT_CHARS] for t in texts]
    )
    vectors = sorted(response.data, key=lambda d: d.index)
    if len(vectors) != len(texts):
        raise ValueError(f"{len(vectors)} embeddings for {len(texts)} inputs")
    return [list(map(float, d.embedding)) for d in vectors]


def embed_query(text: str) -> list[float] | None:
    """The query's embedding, or None when embeddings are off or the call failed."""
    if not enabled() or not text.strip():
        return None
    try:
        return embed([text])[0]
    except (openai.OpenAIError, ValueError):
        logger.warning("query embedding failed; ranking by text only", exc_info=True)
        return None


def chunk_input(chunk: ArticleChunk) -> str:
    return f"{chunk.heading}\n{chunk.text}"


def fill_chunks(*, client: Client, chunk_ids: Sequence[int]) -> int:
    """Embed the given chunks (those still there), in batches; returns how many got one. A
    failed batch is logged and skipped."""
    if not enabled() or not chunk_ids:
        return 0
    model = model_name()
    batch_size = max(1, int(settings.EMBEDDING_BATCH))
    chunks = list(ArticleChunk.objects.for_client(client).filter(pk__in=chunk_ids).order_by("pk"))
    done = 0
    for start in range(0, len(chunks), batch_size):
        batch = chunks[start : start + batch_size]
        try:
            vectors = embed([chunk_input(c) for c in batch])
        except (openai.OpenAIError, ValueError):
            logger.warning(
                "embedding %d chunks failed; they stay text-only", len(batch), exc_info=True
            )
            continue
        for chunk, vector in zip(batch, vectors, strict=True):
            chunk.embedding = vector
            chunk.embedding_model = model
        ArticleChunk.objects.for_client(client).bulk_update(batch, ["embedding", "embedding_model"])
        done += len(batch)
    return done


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
