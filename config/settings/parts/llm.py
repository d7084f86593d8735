"""The LLM gateway and embeddings."""

from config.settings.parts.core import env

# LLM gateway. With no OPENAI_API_KEY the offline demo model answers (clearly labelled).
OPENAI_API_KEY = env("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env("OPENAI_BASE_URL", default="") or None
LLM_MODEL = env("LLM_MODEL", default="gpt-4o-mini")
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=30.0)
# How JSON is asked for: auto (default: json_schema, and the next form whenever a provider
# refuses one; remembered per base URL and model) | json_schema | json_object+schema |
# json_object | text — an explicit form is where the fallback starts (docs/llm-protocol.md).
LLM_RESPONSE_FORMAT = env("LLM_RESPONSE_FORMAT", default="auto")
# The model's context window in tokens (prompt + reply); 0 = unknown. A model price's own
# `context_tokens` wins. Steps shrink history and notes to fit it.
LLM_CONTEXT_TOKENS = env.int("LLM_CONTEXT_TOKENS", default=0)
# Most tokens one reply may have (sent as max_tokens); also what the per-turn cap budgets for it.
LLM_MAX_COMPLETION_TOKENS = env.int("LLM_MAX_COMPLETION_TOKENS", default=800)
# Show a reply in the widget while the model writes it, when nothing after it can change it
# (the SSE `delta` event, docs/widget.md); the calls that may be shown ask with stream=True.
LLM_STREAM_REPLIES = env.bool("LLM_STREAM_REPLIES", default=True)
# The offline demo model's pace when it streams a reply: seconds per 4-character piece.
LLM_OFFLINE_STREAM_SECONDS = env.float("LLM_OFFLINE_STREAM_SECONDS", default=0.02)
# Embeddings through the provider's /v1/embeddings (same OPENAI_BASE_URL / OPENAI_API_KEY);
# empty = full-text search only.
EMBEDDING_MODEL = env("EMBEDDING_MODEL", default="")
EMBEDDING_BATCH = env.int("EMBEDDING_BATCH", default=64)
EMBEDDING_TIMEOUT = env.float("EMBEDDING_TIMEOUT", default=10.0)
