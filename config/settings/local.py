"""Local development and the demo: DEBUG on, SQLite by default, Celery eager unless a broker
is set."""

from .base import *  # noqa: F403
from .base import INSTALLED_APPS, env

DEBUG = env.bool("DEBUG", default=True)
TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = env.bool("TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS", default=True)
TOOL_WEBHOOK_ALLOW_HTTP = env.bool("TOOL_WEBHOOK_ALLOW_HTTP", default=True)
KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS = env.bool(
    "KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS", default=True
)
# The demo: `/` is the first client's pretend shop; the API schema and docs need no sign-in.
DEMO_PAGE = True
API_DOCS_PUBLIC = env.bool("API_DOCS_PUBLIC", default=True)
# The demo admin is a superuser without an authenticator: MFA is opt-in locally.
MFA_REQUIRED_FOR_SUPERUSERS = env.bool("MFA_REQUIRED_FOR_SUPERUSERS", default=False)
# The cost benchmarks (`manage.py bench_modes`, `bench_deliberative`; docs/benchmarks.md) run
# here and in the tests, never in production.
INSTALLED_APPS = [*INSTALLED_APPS, "devtools.benchmarks"]
