"""The reasoning pipeline: guards, context, retrieval budgets, the deliberative loop, the
playground."""

from config.settings.parts.core import env

# Reasoning guards.
REASONING_MAX_TOOL_CALLS_PER_TURN = env.int("REASONING_MAX_TOOL_CALLS_PER_TURN", default=3)
REASONING_MAX_CONTEXT_ROUNDS = env.int("REASONING_MAX_CONTEXT_ROUNDS", default=2)
# A critique that says PROCEED on a draft at or below this confidence (1-10) is not followed:
# the turn asks a clarifying question or hands off (docs/architecture.md, "Safety rules, in code").
REASONING_CRITIQUE_FLOOR = env.int("REASONING_CRITIQUE_FLOOR", default=2)
REASONING_CONFIRMATION_TTL_MINUTES = env.int("REASONING_CONFIRMATION_TTL_MINUTES", default=30)
REASONING_HISTORY_MESSAGES = env.int("REASONING_HISTORY_MESSAGES", default=20)
# Knowledge retrieval (docs/knowledge.md, "Retrieval"): the most tokens of article chunks one
# `kb:` fetch adds (adaptive, deliberative), and standard mode's chunks for the message.
REASONING_KB_TOKENS = env.int("REASONING_KB_TOKENS", default=700)
REASONING_STANDARD_KB_TOKENS = env.int("REASONING_STANDARD_KB_TOKENS", default=1200)
# Deliberative fetches leave out chunks scoring below this share of the best one (0 keeps all):
# its excerpts are re-sent in every call of the turn. 0.4 lost no answer of the demo help
# centre's evaluation set (docs/benchmarks.md, "Relevance cut").
REASONING_DELIBERATIVE_KB_MIN_SHARE = env.float("REASONING_DELIBERATIVE_KB_MIN_SHARE", default=0.4)
# Deliberative loop (docs/llm-protocol.md, "feedback"): the feedback LLM runs only when the mean
# rose by less than this since the step before (negative: after every step, as the seed does);
# after MIN steps a loop that cannot reach TARGET by MAX at its pace ends `stalled`.
REASONING_FEEDBACK_ON_COURSE_GAIN = env.float("REASONING_FEEDBACK_ON_COURSE_GAIN", default=0.03)
REASONING_DELIBERATION_STOP_STALLED = env.bool("REASONING_DELIBERATION_STOP_STALLED", default=True)
# Playground runs with no broker (the demo) run in a background thread of the web process, so
# the page's POST returns at once; off = in the request (docs/playground.md).
PLAYGROUND_EAGER_THREAD = env.bool("PLAYGROUND_EAGER_THREAD", default=True)
