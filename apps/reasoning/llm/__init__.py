"""The LLM gateway: every model call in GuideDesk goes through `llm_complete`
(`apps/reasoning/llm/gateway.py`; the wire protocol is documented in docs/llm-protocol.md).

The package, one job a module:
- `client`: the model asked for (`llm_model`, `model_override`) and the cached `openai` client;
- `errors`: `LLMResult`, `LLMError` (its `kind` is what the turn pipeline acts on), reply parsing;
- `window`: token estimates and fitting a prompt into the model's context window;
- `formats`: how the step's JSON is asked for, and what each provider accepts (remembered);
- `stream`: `with streaming(sink):` and the server-sent events behind it;
- `offline`: the offline demo model that answers when no `OPENAI_API_KEY` is set;
- `gateway`: `llm_complete`, which ties them together.

Callers import the names below from `apps.reasoning.llm`."""

from apps.reasoning.llm.client import (
    OFFLINE_MODEL,
    STEP_HEADER,
    llm_is_offline,
    llm_model,
    model_override,
)
from apps.reasoning.llm.errors import (
    LLMError,
    LLMErrorKind,
    LLMResult,
    correction_message,
    parse_reply,
)
from apps.reasoning.llm.formats import (
    RESPONSE_FORMS,
    forget_response_formats,
    format_instruction,
    remembered_response_format,
    response_format_refusals,
)
from apps.reasoning.llm.gateway import llm_complete
from apps.reasoning.llm.stream import StreamSink, streaming
from apps.reasoning.llm.window import (
    MIN_COMPLETION_TOKENS,
    TOKENS_PER_MESSAGE,
    context_window,
    estimate_tokens,
)

__all__ = [
    "MIN_COMPLETION_TOKENS",
    "OFFLINE_MODEL",
    "RESPONSE_FORMS",
    "STEP_HEADER",
    "TOKENS_PER_MESSAGE",
    "LLMError",
    "LLMErrorKind",
    "LLMResult",
    "StreamSink",
    "context_window",
    "correction_message",
    "estimate_tokens",
    "forget_response_formats",
    "format_instruction",
    "llm_complete",
    "llm_is_offline",
    "llm_model",
    "model_override",
    "parse_reply",
    "remembered_response_format",
    "response_format_refusals",
    "streaming",
]
