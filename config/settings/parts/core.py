"""The project itself: where it lives, its apps and middleware, templates, static files, and
logging. Every other part imports `env` and `BASE_DIR` from here."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parents[3]
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
    "apps.platform",
    "apps.api",
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
    "apps.events",
    "apps.mail",
    "apps.playground",
    "apps.simulations",
    "apps.insights",
    "apps.provisioning",
    "apps.privacy",
    "apps.certify",
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

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
# `/` is a plain landing page; the demo/local settings turn it into the demo shop.
DEMO_PAGE = False

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
