"""The scripted OpenAI-compatible server, as the tests import it. It lives in
`apps/core/testing/fake_llm.py`, where the benchmark commands can import it too."""

from apps.core.testing.fake_llm import *  # noqa: F403
from apps.core.testing.fake_llm import __all__, _ThreadingServer  # noqa: F401
