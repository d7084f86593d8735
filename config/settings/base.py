"""Settings shared by every environment. Everything that varies comes from the environment
(django-environ); see the env-var table in README.md."""

from pathlib import Path

import environ
from celery.schedules import crontab
from corsheaders.defaults import default_headers
from kombu import Queue

from apps.core import language_packs

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env("SECRET_KEY", default="django-insecure-local-only-change-me")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS: list[str] = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS: list[str] = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.postgres",  # full-text search of notes (inactive on SQLite)
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "corsheaders",
    "django_celery_beat",
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "apps.core",
    "apps.accounts",
    "apps.clients",
    "apps.billing",
    "apps.tools",
    "apps.conversations",
    "apps.escalations",
    "apps.identity",
    "apps.notes",
    "apps.knowledge",
    "apps.reasoning",
    "apps.approvals",
    "apps.flags",
    "apps.outcomes",
    "apps.playground",
    "apps.simulations",
    "apps.insights",
    "apps.provisioning",
    "apps.privacy",
    "apps.widget",
    "apps.console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files (the widget's loader, the chat frame, the console, the admin) straight from
    # the web process, compressed and cached (docs/deployment.md).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "corsheaders.middleware.CorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's LocaleMiddleware for staff pages (cookie, Accept-Language); the widget's paths
    # never follow a staff cookie (apps/core/locale.py).
    "apps.core.locale.GuideDeskLocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Staff pages in the staff member's time zone and language (apps/accounts/middleware.py).
    "apps.accounts.middleware.StaffPreferencesMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "apps.accounts.mfa.RequireMfaMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
# A persistent connection (CONN_MAX_AGE > 0) is checked before its first use in each request or
# task, so one the database dropped while idle (restart, failover, a pooler) is replaced
# instead of failing the request (docs/operations.md).
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=True))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://guidedesk")}

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Session-backed messages: a new API key's secret, shown once in an admin message, must never
# travel in a (signed but readable) cookie.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "/admin/"

# django-allauth: e-mail login, no open sign-up (staff accounts are created by an operator),
# TOTP MFA with recovery codes available to every staff user.
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = None
ACCOUNT_EMAIL_VERIFICATION = "optional"
ACCOUNT_ADAPTER = "apps.accounts.adapters.StaffAccountAdapter"
# Login limits (allauth's syntax: "<n>/<period>/<ip|key|user>", comma-separated; the key of
# login_failed is the e-mail address). Per address, so they need TRUSTED_PROXY_COUNT behind a proxy.
ACCOUNT_RATE_LIMITS = {
    "login": env("ACCOUNT_RATE_LIMIT_LOGIN", default="30/m/ip"),
    "login_failed": env("ACCOUNT_RATE_LIMIT_LOGIN_FAILED", default="10/m/ip,5/5m/key"),
    "reset_password": env("ACCOUNT_RATE_LIMIT_RESET_PASSWORD", default="20/m/ip,5/m/key"),
}
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = "GuideDesk"
# Platform superusers must set up TOTP before using the admin, console or staff API (clients
# can require it of their staff with Client.require_mfa). Off in local/demo settings.
MFA_REQUIRED_FOR_SUPERUSERS = env.bool("MFA_REQUIRED_FOR_SUPERUSERS", default=True)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# The shipped languages, each named in its own language: one per language pack
# (apps/core/language_packs/). Catalogues: locale/<code>/LC_MESSAGES/django.po, compiled with
# `make messages` (docs/languages.md).
LANGUAGES = language_packs.settings_languages()
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="GuideDesk <noreply@guidedesk.example>")
# GuideDesk's own address as staff reach it (scheme, host, optional port; no path): e-mails
# written outside a request (hand-off notifications) link to the console with it. Empty: the
# first of ALLOWED_HOSTS over https (http for localhost / 127.0.0.1, with the demo's port 8000).
SITE_URL = env("SITE_URL", default="")

# Client addresses behind a reverse proxy: the number of proxies we run in front of the app,
# each appending the address it saw to X-Forwarded-For. One setting feeds DRF's throttles
# (NUM_PROXIES) and allauth's login limits (ALLAUTH_TRUSTED_PROXY_COUNT); with 0 the header is
# ignored, so behind a proxy every visitor would share the proxy's address (and its limits).
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
ALLAUTH_TRUSTED_PROXY_COUNT = TRUSTED_PROXY_COUNT

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.ApiKeyAuthentication",
        "apps.accounts.authentication.StaffSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.core.api.exception_handler",
    # JSON only, with limits on nesting, strings and numbers (apps/core/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["apps.core.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apps.core.negotiation.LenientContentNegotiation",
    "DEFAULT_PAGINATION_CLASS": "apps.core.api.Pagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": None,
    # How many reverse proxies in front of us append to X-Forwarded-For (see TRUSTED_PROXY_COUNT
    # below); 0 = the address comes from the socket (REMOTE_ADDR) and the header is ignored.
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    "DEFAULT_THROTTLE_RATES": {
        # The public chat widget (docs/widget.md). Every request, failed ones included, counts
        # against the caller's address; the tenant-wide ceiling counts only real work
        # (conversations started and messages posted), so nobody can lock a tenant out with its
        # public widget key.
        "widget_ip": env("THROTTLE_WIDGET_IP", default="120/min"),
        "widget_key": env("THROTTLE_WIDGET_KEY", default="3000/min"),
        "widget_conversations": env("THROTTLE_WIDGET_CONVERSATIONS", default="10/min"),
        "widget_messages": env("THROTTLE_WIDGET_MESSAGES", default="20/min"),
        # Ratings per visitor (client address) and client, over all their conversations: a
        # visitor cannot stuff the outcome figures by starting and rating many conversations.
        "widget_ratings": env("THROTTLE_WIDGET_RATINGS", default="20/hour"),
        # Tokens, not requests: what the turns of one conversation (a widget session: one
        # customer), and of one client address (an office or a carrier's NAT: many), used in
        # the window. Over either, the next message is stored and handed to staff with a short
        # notice, no model call (docs/widget.md "Limits"); a turn admitted under it may take
        # them past it. Sized from the README's demo conversation
        # (devtools/benchmarks/demo_tokens.py: ≈ 40k tokens, ≈ 144k were every turn
        # deliberative): a conversation gets more than that, an address ten times it.
        "widget_tokens": env("THROTTLE_WIDGET_TOKENS", default="200000/hour"),
        "widget_address_tokens": env("THROTTLE_WIDGET_ADDRESS_TOKENS", default="2000000/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GuideDesk API",
    "DESCRIPTION": "Widget, staff and back-office API of GuideDesk.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc are served from our own static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# The OpenAPI schema and Swagger UI: signed-in staff only unless this is on (config/api_docs.py).
API_DOCS_PUBLIC = env.bool("API_DOCS_PUBLIC", default=False)
# `/` is a plain landing page; the demo/local settings turn it into the demo shop.
DEMO_PAGE = False

CORS_ALLOW_ALL_ORIGINS = False
# The widget API sends its public key and SSE resume position in headers (apps/widget/auth.py
# decides per request which origins get CORS).
CORS_ALLOW_HEADERS = (*default_headers, "x-widget-key", "last-event-id")
CORS_ALLOWED_ORIGINS: list[str] = env.list("CORS_ALLOWED_ORIGINS", default=[])

# Staff replies a customer has not seen in the widget this many seconds after they were sent are
# e-mailed to the address the customer left (one e-mail per batch; docs/widget.md).
WIDGET_REPLY_EMAIL_DELAY_SECONDS = env.float("WIDGET_REPLY_EMAIL_DELAY_SECONDS", default=180.0)
# The address is used only once the customer confirms it with the link we e-mail: the link is
# valid this long, and at most this many confirmation e-mails go to one address, and for one
# conversation, per hour (docs/widget.md "The e-mail address").
WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS = env.int("WIDGET_CONTACT_CONFIRM_MAX_AGE_HOURS", default=48)
WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR = env.int("WIDGET_CONTACT_CONFIRMATIONS_PER_HOUR", default=3)
# The e-mail one-time code (apps/identity; docs/widget.md "E-mail one-time code"): at most this
# many codes per address, and per visitor (their conversation, or their widget visitor id), per
# hour. A code lives 10 minutes and dies after 5 wrong tries (fixed: docs/privacy.md).
EMAIL_CODES_PER_ADDRESS_PER_HOUR = env.int("EMAIL_CODES_PER_ADDRESS_PER_HOUR", default=3)
EMAIL_CODES_PER_VISITOR_PER_HOUR = env.int("EMAIL_CODES_PER_VISITOR_PER_HOUR", default=5)

# Celery: with no broker configured, tasks run eagerly in-process (the demo needs no Redis).
CELERY_TASK_ALWAYS_EAGER = not env("CELERY_BROKER_URL", default="")
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="") or "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One turn, start to finish (docs/operations.md): every model call, webhook call and retry of a
# turn fits in REASONING_TURN_DEADLINE_SECONDS; the task's limits add room for the final
# bookkeeping; the lease (how long a turn's claim and its conversation's turn lock hold) is the
# hard limit, so a live turn is never taken over; Redis redelivers an unacknowledged turn (its
# worker died) only after the lease, and checks for such turns every 10 s.
REASONING_TURN_DEADLINE_SECONDS = env.int("REASONING_TURN_DEADLINE_SECONDS", default=90)
CELERY_TASK_SOFT_TIME_LIMIT = REASONING_TURN_DEADLINE_SECONDS + 20
CELERY_TASK_TIME_LIMIT = REASONING_TURN_DEADLINE_SECONDS + 30
REASONING_TURN_LEASE_SECONDS = CELERY_TASK_TIME_LIMIT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": REASONING_TURN_LEASE_SECONDS + 10,
    "unacked_restore_interval": 10,
    "unacked_restore_throttle": 1,
    # a broker that vanished without closing the socket must not hang a publish forever
    "socket_timeout": 10,
    "socket_connect_timeout": 5,
}
# The sweeper (reasoning.sweep_turns, on the beat schedule below) re-queues or hands off turns
# left unfinished past their lease.
REASONING_SWEEP_INTERVAL_SECONDS = env.int("REASONING_SWEEP_INTERVAL_SECONDS", default=30)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two lanes (docs/deployment.md, "Background work"): turns and everything a customer waits for
# go to the default queue; long housekeeping (knowledge syncs and their beat, the nightly
# insights, billing rollups, retention runs) goes to the `background` queue, which the
# Procfile's `background` process consumes, so it never takes a thread a live turn needs. A
# worker started without `-Q` consumes both (the Makefile's): there a knowledge sync takes a
# slot at the lowest priority (apps/core/slots.py).
CELERY_TASK_DEFAULT_QUEUE = "celery"
BACKGROUND_QUEUE = "background"
CELERY_TASK_QUEUES = (  # each queue its own routing key: a message lands in one queue only
    Queue(CELERY_TASK_DEFAULT_QUEUE, routing_key=CELERY_TASK_DEFAULT_QUEUE),
    Queue(BACKGROUND_QUEUE, routing_key=BACKGROUND_QUEUE),
)
BACKGROUND_TASKS = (
    "knowledge.sync_source",
    "knowledge.resync_due",
    "insights.schedule_nightly",
    "insights.generate_for_client",
    "billing.rollup_daily_usage",
    "billing.reconcile_usage_counters",
    "notes.apply_retention",
    "privacy.apply_retention",
    "identity.purge_email_codes",
)
CELERY_TASK_ROUTES = {name: {"queue": BACKGROUND_QUEUE} for name in BACKGROUND_TASKS}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Insights (docs/architecture.md, "Insights"): when the nightly run starts (server time zone),
# how many whole days it reads, and the bounds of its one model call.
INSIGHTS_HOUR = env.int("INSIGHTS_HOUR", default=3)
INSIGHTS_MINUTE = env.int("INSIGHTS_MINUTE", default=15)
INSIGHTS_DAYS = env.int("INSIGHTS_DAYS", default=7)
INSIGHTS_MAX_INPUT_TOKENS = env.int("INSIGHTS_MAX_INPUT_TOKENS", default=3000)
INSIGHTS_ITEM_CHARS = env.int("INSIGHTS_ITEM_CHARS", default=240)
INSIGHTS_TOKEN_CAP = env.int("INSIGHTS_TOKEN_CAP", default=6000)
INSIGHTS_MIN_COUNT = env.int("INSIGHTS_MIN_COUNT", default=2)
INSIGHTS_MAX_TOPICS = env.int("INSIGHTS_MAX_TOPICS", default=5)
INSIGHTS_LOW_CONFIDENCE_BELOW = env.int("INSIGHTS_LOW_CONFIDENCE_BELOW", default=5)
# A turn whose knowledge search found no chunk scoring above this is a knowledge gap (the
# score's scale is the search's: ts_rank on PostgreSQL, bm25 on SQLite, the fused rank with
# embeddings). 0 = only searches that found nothing at all.
INSIGHTS_KNOWLEDGE_MIN_SCORE = env.float("INSIGHTS_KNOWLEDGE_MIN_SCORE", default=0.0)
INSIGHTS_RUN_STALE_SECONDS = 30 * 60
CELERY_BEAT_SCHEDULE = {
    # Turns left unfinished past their lease (a killed worker, a lost task, a database outage):
    # re-queued once, then handed to a person (docs/operations.md). Idempotent.
    "reasoning-sweep-turns": {
        "task": "reasoning.sweep_turns",
        "schedule": REASONING_SWEEP_INTERVAL_SECONDS,
    },
    # Aggregate yesterday's (and any missed day's) usage into daily rollups; idempotent.
    "billing-rollup-daily-usage": {
        "task": "billing.rollup_daily_usage",
        "schedule": 60 * 60,  # hourly: cheap, and a missed run catches up on the next one
    },
    # Re-count the monthly budget counters from the usage records (e.g. after a budget is
    # switched on mid-month); idempotent.
    "billing-reconcile-usage-counters": {
        "task": "billing.reconcile_usage_counters",
        "schedule": 6 * 60 * 60,
    },
    # Nightly: one insights task per active client (fanned out), over the last INSIGHTS_DAYS
    # whole days; idempotent per client and window (docs/operations.md).
    "insights-nightly": {
        "task": "insights.schedule_nightly",
        "schedule": crontab(minute=INSIGHTS_MINUTE, hour=INSIGHTS_HOUR),
    },
    # Tool calls left waiting for a teammate's approval past their time become hand-offs.
    "reasoning-expire-approvals": {
        "task": "reasoning.expire_approvals",
        "schedule": 60,
    },
    # Delete each client's notes older than its plan's notes_retention_days; idempotent.
    "notes-apply-retention": {
        "task": "notes.apply_retention",
        "schedule": 24 * 60 * 60,
    },
    # Erase conversations idle longer than their plan's retention_days (a bounded batch per
    # run) and drop privacy records past their keeping period; idempotent (docs/privacy.md).
    "privacy-apply-retention": {
        "task": "privacy.apply_retention",
        "schedule": 24 * 60 * 60,
    },
}

# Privacy (docs/privacy.md): conversations the retention task erases per run at most (the next
# run continues), and how long the record of an export or erasure is kept (3 years: the usual
# limitation period for a claim about it).
PRIVACY_RETENTION_BATCH = env.int("PRIVACY_RETENTION_BATCH", default=500)
PRIVACY_RECORD_KEEP_DAYS = env.int("PRIVACY_RECORD_KEEP_DAYS", default=1095)

# Billing: tokens reserved per turn before it runs (when the plan sets no per-turn cap), when an
# uncommitted reservation counts as abandoned, and how long after midnight a day may change.
BILLING_TURN_TOKEN_RESERVE = env.int("BILLING_TURN_TOKEN_RESERVE", default=12000)
# A deliberative turn makes 10–25 calls: it reserves (and may use) this much instead.
BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE = env.int(
    "BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE", default=120000
)
BILLING_RESERVATION_STALE_SECONDS = env.int(
    "BILLING_RESERVATION_STALE_SECONDS", default=2 * CELERY_TASK_TIME_LIMIT
)
BILLING_ROLLUP_GRACE_SECONDS = env.int(
    "BILLING_ROLLUP_GRACE_SECONDS", default=CELERY_TASK_TIME_LIMIT + 60
)
CELERY_TIMEZONE = TIME_ZONE

# Redis for the live event streams (pub/sub, docs/widget.md) and the per-tenant turn slots;
# defaults to the broker when that is Redis. Unset (the demo): streams poll, no slots.
REDIS_URL = env("REDIS_URL", default="") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
)
SLOTS_REDIS_URL = REDIS_URL
# The fleet's turn slots (apps/core/slots.py, docs/deployment.md "Fairness"): capacity = the
# worker threads registered by every worker process (TURN_SLOTS_CAPACITY > 0 overrides it; the
# fallback counts while no worker has registered); one tenant may hold capacity − reserve slots,
# and the reserve goes only to tenants holding less than their share of it (tenants already
# running turns stop at capacity − reserve together); TURNS_PER_CLIENT_MAX > 0 adds a fixed
# per-tenant cap (0 = none).
TURN_SLOTS_CAPACITY = env.int("TURN_SLOTS_CAPACITY", default=0)
TURN_SLOTS_FALLBACK_CAPACITY = 100  # the Procfile's CELERY_CONCURRENCY, until a worker registers
TURN_SLOTS_RESERVE_PERCENT = env.float("TURN_SLOTS_RESERVE_PERCENT", default=10.0)
TURNS_PER_CLIENT_MAX = env.int("TURNS_PER_CLIENT_MAX", default=0)
# Playground runs share the slots at a lower priority: at most this many run at once per client
# (more wait), and at most PLAYGROUND_RUNS_QUEUED_PER_CLIENT more may wait; beyond, a new run is
# refused with a message (docs/playground.md).
PLAYGROUND_RUNS_PER_CLIENT = env.int("PLAYGROUND_RUNS_PER_CLIENT", default=2)
PLAYGROUND_RUNS_QUEUED_PER_CLIENT = env.int("PLAYGROUND_RUNS_QUEUED_PER_CLIENT", default=5)
# Simulation jobs (one case run each, apps/simulations) come after live turns and playground
# runs: at most SIMULATION_JOBS_PER_CLIENT run at once per client, and all of them together hold
# at most SIMULATION_SLOTS_PERCENT of the fleet's slots (docs/simulations.md). With no broker
# (the demo) a run goes through a background thread of the web process
# (SIMULATION_EAGER_THREAD), or the caller's thread with that off (tests).
SIMULATION_JOBS_PER_CLIENT = env.int("SIMULATION_JOBS_PER_CLIENT", default=16)
# At most this many simulation runs queued or running per client; a run beyond is refused (429).
SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT = env.int("SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT", default=2)
SIMULATION_SLOTS_PERCENT = env.float("SIMULATION_SLOTS_PERCENT", default=50.0)
SIMULATION_EAGER_THREAD = env.bool("SIMULATION_EAGER_THREAD", default=True)
# Background jobs (knowledge syncs) come after everything else in a worker that also runs
# turns: they take a slot only while nothing else waits for it, and hold at most this share of
# the fleet's slots (a worker of the `background` queue alone runs them on its own threads).
BACKGROUND_SLOTS_PERCENT = env.float("BACKGROUND_SLOTS_PERCENT", default=10.0)
# Threads per web process for the synchronous part of API requests and stream set-ups served by
# apps/core/asgi.StreamingPaths (they give their database connection back when done).
WEB_THREADS = env.int("WEB_THREADS", default=32)

# The edge: what the web process itself refuses, with or without a proxy in front
# (apps/core/uvicorn_worker.py for the request head, apps/core/asgi.BoundedRequests for the body;
# docs/deployment.md). A request head (request line + header fields) larger than
# REQUEST_HEADERS_MAX_BYTES or with more than REQUEST_HEADERS_MAX_COUNT fields gets 431; one not
# complete REQUEST_HEADER_TIMEOUT seconds after the connection opened (or the request began)
# gets 408 and the connection is closed.
REQUEST_HEADERS_MAX_BYTES = env.int("REQUEST_HEADERS_MAX_BYTES", default=32 * 1024)
REQUEST_HEADERS_MAX_COUNT = env.int("REQUEST_HEADERS_MAX_COUNT", default=100)
REQUEST_HEADER_TIMEOUT = env.float("REQUEST_HEADER_TIMEOUT", default=10.0)
# Request bodies: the widget's API (a customer message is at most 4,000 characters) and every
# other route (the back-office API's bulk imports); larger gets 413 — by Content-Length before
# a byte is read, or as soon as a streamed (chunked) body passes it. A body whose bytes do not
# arrive within REQUEST_BODY_TIMEOUT seconds gets 408.
WIDGET_REQUEST_BODY_MAX_BYTES = env.int("WIDGET_REQUEST_BODY_MAX_BYTES", default=64 * 1024)
REQUEST_BODY_MAX_BYTES = env.int("REQUEST_BODY_MAX_BYTES", default=2_621_440)
REQUEST_BODY_TIMEOUT = env.float("REQUEST_BODY_TIMEOUT", default=30.0)
# A body within the limits stays in memory: Django's ASGI handler never spools it to a file.
FILE_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, REQUEST_BODY_MAX_BYTES, WIDGET_REQUEST_BODY_MAX_BYTES)

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

# Tool webhooks may only reach public addresses unless this is on (SSRF protection); local
# development and the tests run their tool servers on 127.0.0.1.
TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = env.bool("TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS", default=False)
# Tool webhooks must use https unless this is on (local development and the tests).
TOOL_WEBHOOK_ALLOW_HTTP = env.bool("TOOL_WEBHOOK_ALLOW_HTTP", default=False)
# Also send the pre-Standard-Webhooks `X-GuideDesk-Signature: sha256=<hex>` header during its
# deprecation window (docs/webhooks.md).
TOOL_WEBHOOK_LEGACY_SIGNATURE = env.bool("TOOL_WEBHOOK_LEGACY_SIGNATURE", default=True)

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
# E-mail one-time codes older than 24 hours are deleted (apps/identity; docs/privacy.md).
CELERY_BEAT_SCHEDULE["identity-purge-email-codes"] = {
    "task": "identity.purge_email_codes",
    "schedule": 60 * 60,
}
CELERY_BEAT_SCHEDULE["knowledge-resync-due"] = {
    "task": "knowledge.resync_due",
    "schedule": KNOWLEDGE_RESYNC_CHECK_SECONDS,
}

# Reasoning guards.
REASONING_MAX_TOOL_CALLS_PER_TURN = env.int("REASONING_MAX_TOOL_CALLS_PER_TURN", default=3)
REASONING_MAX_CONTEXT_ROUNDS = env.int("REASONING_MAX_CONTEXT_ROUNDS", default=2)
# A critique that says PROCEED on a draft at or below this confidence (1-10) is not followed:
# the turn asks a clarifying question or hands off (docs/architecture.md, "Safety rules, in code").
REASONING_CRITIQUE_FLOOR = env.int("REASONING_CRITIQUE_FLOOR", default=2)
REASONING_CONFIRMATION_TTL_MINUTES = env.int("REASONING_CONFIRMATION_TTL_MINUTES", default=30)
# A tool call that waits for a teammate's approval becomes a hand-off after this long (a tool's
# approval rule may set its own `timeout_minutes`); the beat task checks every minute.
TOOL_APPROVAL_TIMEOUT_MINUTES = env.int("TOOL_APPROVAL_TIMEOUT_MINUTES", default=30)
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
# Embeddings through the provider's /v1/embeddings (same OPENAI_BASE_URL / OPENAI_API_KEY);
# empty = full-text search only.
EMBEDDING_MODEL = env("EMBEDDING_MODEL", default="")
EMBEDDING_BATCH = env.int("EMBEDDING_BATCH", default=64)
EMBEDDING_TIMEOUT = env.float("EMBEDDING_TIMEOUT", default=10.0)
# Playground runs with no broker (the demo) run in a background thread of the web process, so
# the page's POST returns at once; off = in the request (docs/playground.md).
PLAYGROUND_EAGER_THREAD = env.bool("PLAYGROUND_EAGER_THREAD", default=True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    # A worker's two lines per task, "Task … received" and "Task … succeeded in …s", cost about
    # a tenth of Celery's own CPU per task (docs/benchmarks.md, "Celery per-task overhead") and
    # say nothing an operator acts on; INFO brings them back. Failures (ERROR, with traceback),
    # rejections and time limits log above WARNING either way; retries are logged by
    # config/celery.py while these are off.
    "loggers": {
        name: {"level": env("CELERY_TASK_LOG_LEVEL", default="WARNING")}
        for name in ("celery.worker.strategy", "celery.app.trace")
    },
}
