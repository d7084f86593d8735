"""Knowledge import: what a sync may fetch and extract, re-syncs, per-client limits."""

from config.settings.parts.celery import CELERY_BEAT_SCHEDULE
from config.settings.parts.core import env

# Knowledge import (docs/knowledge.md, "Importing"): what one sync of a source may fetch. Pages
# may only come from public addresses unless KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS is on (the
# webhooks' SSRF rule; local development and the tests serve their sites on 127.0.0.1).
KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS = env.bool(
    "KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS", default=False
)
KNOWLEDGE_MAX_PAGES = env.int("KNOWLEDGE_MAX_PAGES", default=200)
KNOWLEDGE_MAX_PAGE_BYTES = env.int("KNOWLEDGE_MAX_PAGE_BYTES", default=2 * 1024 * 1024)
KNOWLEDGE_MAX_SYNC_BYTES = env.int("KNOWLEDGE_MAX_SYNC_BYTES", default=50 * 1024 * 1024)
KNOWLEDGE_SYNC_SECONDS = env.int("KNOWLEDGE_SYNC_SECONDS", default=300)
KNOWLEDGE_FETCH_TIMEOUT = env.float("KNOWLEDGE_FETCH_TIMEOUT", default=15.0)
# Nested sitemaps (a sitemap index) read per sync, at most.
KNOWLEDGE_MAX_SITEMAPS = env.int("KNOWLEDGE_MAX_SITEMAPS", default=20)
# PDFs, and HTML pages over EXTRACT_HTML_INLINE_BYTES, are read in a child process with these
# hard limits (apps/knowledge/sandbox.py): CPU seconds, address space, the text it may return,
# and a wall-clock kill.
KNOWLEDGE_EXTRACT_CPU_SECONDS = env.int("KNOWLEDGE_EXTRACT_CPU_SECONDS", default=20)
KNOWLEDGE_EXTRACT_MEMORY_MB = env.int("KNOWLEDGE_EXTRACT_MEMORY_MB", default=512)
KNOWLEDGE_EXTRACT_OUTPUT_BYTES = env.int("KNOWLEDGE_EXTRACT_OUTPUT_BYTES", default=8 * 1024 * 1024)
KNOWLEDGE_EXTRACT_SECONDS = env.float("KNOWLEDGE_EXTRACT_SECONDS", default=40.0)
KNOWLEDGE_EXTRACT_HTML_INLINE_BYTES = env.int(
    "KNOWLEDGE_EXTRACT_HTML_INLINE_BYTES", default=256 * 1024
)
# The beat task starts at most this many due re-syncs per run, every CHECK_SECONDS, spaced
# SPACING_SECONDS apart (keep BATCH × SPACING under the broker's visibility timeout).
KNOWLEDGE_RESYNC_BATCH = env.int("KNOWLEDGE_RESYNC_BATCH", default=20)
KNOWLEDGE_RESYNC_CHECK_SECONDS = env.int("KNOWLEDGE_RESYNC_CHECK_SECONDS", default=15 * 60)
KNOWLEDGE_RESYNC_SPACING_SECONDS = env.float("KNOWLEDGE_RESYNC_SPACING_SECONDS", default=3.0)
# Per client: at most SYNCS_PER_CLIENT syncs run at once (more wait, queued, and are tried
# again about every SYNC_WAIT_SECONDS), and at most SOURCES_PER_CLIENT sources exist.
KNOWLEDGE_SYNCS_PER_CLIENT = env.int("KNOWLEDGE_SYNCS_PER_CLIENT", default=2)
KNOWLEDGE_SYNC_WAIT_SECONDS = env.float("KNOWLEDGE_SYNC_WAIT_SECONDS", default=30.0)
KNOWLEDGE_SOURCES_PER_CLIENT = env.int("KNOWLEDGE_SOURCES_PER_CLIENT", default=50)
# Start the syncs of web sources whose `resync_hours` have passed (bounded per run); idempotent.
CELERY_BEAT_SCHEDULE["knowledge-resync-due"] = {
    "task": "knowledge.resync_due",
    "schedule": KNOWLEDGE_RESYNC_CHECK_SECONDS,
}
