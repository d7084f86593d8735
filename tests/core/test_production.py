"""Production as shipped: EMAIL_URL is required and checked,
`check --deploy` is clean, `/` is a landing page without tenant data, no browsable API, and the
API schema and docs are for signed-in staff unless API_DOCS_PUBLIC opens them.

Settings modules are loaded in a fresh interpreter with a controlled environment (the production
module reads its secrets at import), then what they say is applied to this process where a
request has to be made."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import Client as DjangoClient
from django.test import override_settings

from apps.accounts.services import api_key_issue
from apps.core.checks import check_email_is_delivered
from tests.conftest import api_for
from tests.core.helpers import run_python
from tests.factories import ClientFactory, MembershipFactory, UserFactory

PRODUCTION_ENV = {
    "SECRET_KEY": "x7Qm2-production-like-secret-key-of-fifty-characters-9fKz!pL",
    "ALLOWED_HOSTS": "guidedesk.example",
    "DATABASE_URL": "postgres://guidedesk@db.invalid:5432/guidedesk",
    "EMAIL_URL": "smtp+tls://mailer:secret@smtp.example:587",
    "CELERY_BROKER_URL": "redis://redis.invalid:6379/0",
}
SETTINGS_READ = (
    "'EMAIL_BACKEND', 'EMAIL_HOST', 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', "
    "'SECURE_HSTS_PRELOAD', 'API_DOCS_PUBLIC', 'DEMO_PAGE', 'REST_FRAMEWORK', 'INSTALLED_APPS'"
)


def run_django(module: str, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` after django.setup() under settings `module`, with only these variables set
    (no .env file is read: the worktree has none, and none of ours leak in)."""
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "DJANGO_SETTINGS_MODULE": module,
        **env,
    }
    return run_python(f"import django; django.setup(); {code}", environment, timeout=120)


def settings_of(module: str, **env: str) -> dict[str, Any]:
    done = run_django(
        module,
        "import json; from django.conf import settings as s; "
        f"print(json.dumps({{n: getattr(s, n, None) for n in ({SETTINGS_READ})}}, default=str))",
        **env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_deploy(**env: str) -> subprocess.CompletedProcess[str]:
    return run_django(
        "config.settings.production",
        "from django.core.management import call_command; "
        "call_command('check', deploy=True, fail_level='WARNING')",
        **env,
    )


@pytest.fixture(scope="module")
def production() -> dict[str, Any]:
    return settings_of("config.settings.production", **PRODUCTION_ENV)


# ---------------------------------------------------------------------------- 11.9 e-mail


@pytest.mark.parametrize(
    "variable",
    [
        "EMAIL_URL",
        # Without a broker every turn would run in the web process, with no sweeper to finish
        # one a failure interrupted: production does not start.
        "CELERY_BROKER_URL",
    ],
)
def test_production_refuses_to_start_without(variable):
    without = {k: v for k, v in PRODUCTION_ENV.items() if k != variable}
    done = run_django("config.settings.production", "print('started')", **without)
    assert done.returncode != 0
    assert "started" not in done.stdout
    assert f"ImproperlyConfigured: Set the {variable} environment variable" in done.stderr


def test_the_production_pool_checks_each_connection_it_hands_out():
    """A connection the database dropped while it sat in the pool is discarded, not handed to a
    request: the pool's `check` runs psycopg's `check_connection`, and one that fails it makes
    this pool drop every other dead connection at once (apps/platform/db.py). The shipped sizes."""
    done = run_django(
        "config.settings.production",
        "from django.db import connection; from apps.platform.db import SweepOnFailedCheck; "
        "p = connection.pool; "
        "print(type(p._check) is SweepOnFailedCheck and p._check.pool is p, "
        "p.min_size, p.max_size, p.timeout, connection.vendor)",
        **PRODUCTION_ENV,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True 2 20 30.0 postgresql"


def test_production_sends_e_mail_through_email_url(production):
    assert production["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert production["EMAIL_HOST"] == "smtp.example"


def test_check_deploy_refuses_an_email_url_that_delivers_nothing():
    done = check_deploy(**{**PRODUCTION_ENV, "EMAIL_URL": "consolemail://"})
    assert done.returncode != 0
    assert "guidedesk.E001" in done.stderr
    assert "EMAIL_BACKEND is django.core.mail.backends.console.EmailBackend" in done.stderr


@pytest.mark.parametrize(
    "backend",
    [
        "django.core.mail.backends.console.EmailBackend",
        "django.core.mail.backends.filebased.EmailBackend",
        "django.core.mail.backends.locmem.EmailBackend",
        "django.core.mail.backends.dummy.EmailBackend",
    ],
)
def test_the_email_check_names_each_backend_that_delivers_nothing(backend):
    with override_settings(EMAIL_BACKEND=backend):
        [error] = check_email_is_delivered()
        assert error.id == "guidedesk.E001" and backend in error.msg
        assert "guidedesk.E001" in {m.id for m in run_checks(include_deployment_checks=True)}
    with override_settings(EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend"):
        assert check_email_is_delivered() == []


def test_the_email_check_is_a_deployment_check_only():
    with override_settings(EMAIL_BACKEND="django.core.mail.backends.console.EmailBackend"):
        assert "guidedesk.E001" not in {m.id for m in run_checks()}


# ---------------------------------------------------------------------------- 11.12 check --deploy


def test_check_deploy_under_production_settings_is_clean():
    done = check_deploy(**PRODUCTION_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "System check identified no issues" in done.stdout


def test_hsts_sub_domains_and_preload_are_on_by_default_and_settable(production):
    assert production["SECURE_HSTS_SECONDS"] == 365 * 24 * 60 * 60
    assert production["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert production["SECURE_HSTS_PRELOAD"] is True
    off = settings_of(
        "config.settings.production",
        **PRODUCTION_ENV,
        SECURE_HSTS_INCLUDE_SUBDOMAINS="false",
        SECURE_HSTS_PRELOAD="false",
        SECURE_HSTS_SECONDS="3600",
    )
    assert off["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is False
    assert off["SECURE_HSTS_PRELOAD"] is False
    assert off["SECURE_HSTS_SECONDS"] == 3600


# ---------------------------------------------------------------------------- 11.12 browsable API


BROWSER_GET = (
    "from django.test import Client; "
    "r = Client().get('/api/v1/conversations/{query}', secure=True, "
    "HTTP_HOST='guidedesk.example', "
    "HTTP_ACCEPT='text/html,application/xhtml+xml,*/*;q=0.8'); "
    "print(r.status_code, r['Content-Type'].split(';')[0])"
)


@pytest.mark.parametrize("query", ["", "?format=api"])
def test_no_browsable_api_in_production(production, query):
    # DRF binds a view's renderers when the view class is defined, so this runs under the real
    # production settings (the request needs no database: it is refused before any query)
    assert production["REST_FRAMEWORK"]["DEFAULT_RENDERER_CLASSES"] == [
        "rest_framework.renderers.JSONRenderer"
    ]
    done = run_django(
        "config.settings.production", BROWSER_GET.format(query=query), **PRODUCTION_ENV
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["401", "application/json"]
    # the development settings still offer DRF's HTML pages to a browser
    local = run_django(
        "config.settings.local", BROWSER_GET.format(query=query), ALLOWED_HOSTS="guidedesk.example"
    )
    assert local.returncode == 0, local.stderr[-2000:]
    assert local.stdout.split()[-2:] == ["401", "text/html"]


# ---------------------------------------------------------------------------- 11.12 schema + docs


def test_schema_and_docs_are_staff_only_in_production_and_public_locally(production):
    assert production["API_DOCS_PUBLIC"] is False
    opened = settings_of("config.settings.production", **PRODUCTION_ENV, API_DOCS_PUBLIC="true")
    assert opened["API_DOCS_PUBLIC"] is True
    assert settings_of("config.settings.local")["API_DOCS_PUBLIC"] is True


@pytest.mark.django_db
def test_schema_and_docs_need_staff_sign_in_unless_public(settings):
    settings.API_DOCS_PUBLIC = False
    anonymous = DjangoClient()
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith("/accounts/login/?next=")
    schema = anonymous.get("/api/schema/")
    assert schema.status_code == 401
    assert schema.json()["error"]["code"] == "not_authenticated"
    assert b"openapi" not in schema.content

    # an API key is not a staff sign-in
    key = api_key_issue(client=ClientFactory(), name="k")[1]
    assert api_for(key).get("/api/schema/").status_code == 401

    outsider = DjangoClient()
    outsider.force_login(UserFactory(is_staff=False))
    assert outsider.get("/api/schema/").status_code == 403
    assert outsider.get("/api/docs/").status_code == 403

    for user in (UserFactory(is_staff=True), MembershipFactory(user__is_staff=False).user):
        staff = DjangoClient()
        staff.force_login(user)
        schema = staff.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
        assert schema.status_code == 200
        assert "/api/v1/conversations/" in schema.json()["paths"]
        docs = staff.get("/api/docs/")
        assert docs.status_code == 200 and b"swagger-ui" in docs.content

    settings.API_DOCS_PUBLIC = True
    assert anonymous.get("/api/schema/").status_code == 200
    assert anonymous.get("/api/docs/").status_code == 200


# ---------------------------------------------------------------------------- 11.10 `/`


def test_only_the_demo_settings_serve_the_demo_page(production):
    assert production["DEMO_PAGE"] is False
    assert settings_of("config.settings.local")["DEMO_PAGE"] is True
    assert settings_of("config.settings.test")["DEMO_PAGE"] is False


@pytest.mark.django_db
def test_production_home_is_a_landing_page_without_tenant_data(settings):
    settings.DEMO_PAGE = False
    shop = ClientFactory(slug="trail", name="Trailhead Outfitters")
    response = DjangoClient().get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/accounts/login/"' in html
    assert 'href="/admin/"' in html and 'href="/console/"' in html
    for secret in (
        shop.name,
        shop.widget_key,
        "hi@x.example",
        "+1 555 0100",
        "widget.js",
        "data-widget-key",
    ):
        assert secret not in html

    signed_in = DjangoClient()
    signed_in.force_login(MembershipFactory(client=shop, user__email="agent@trail.example").user)
    html = signed_in.get("/").content.decode()
    assert "agent@trail.example" in html and 'href="/accounts/logout/"' in html
    assert shop.name not in html and shop.widget_key not in html

    settings.DEMO_PAGE = True  # the demo/local settings
    assert shop.widget_key in DjangoClient().get("/").content.decode()


# ---------------------------------------------------------------------------- benchmarks


def test_production_has_none_of_the_development_scaffolding(production):
    """devtools/ (the scripted fake model, the `bench_*` commands): installed by the local and
    test settings, never by production, and not one of its modules is loaded when a production
    process starts (its URLconf and admin included)."""
    assert [app for app in production["INSTALLED_APPS"] if app.split(".")[0] == "devtools"] == []
    assert "apps.widget" in production["INSTALLED_APPS"]
    assert "devtools.benchmarks" in settings_of("config.settings.local")["INSTALLED_APPS"]
    loaded = run_django(
        "config.settings.production",
        "import sys; from django.urls import get_resolver; get_resolver().url_patterns; "
        "from django.contrib import admin; admin.autodiscover(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'devtools'))",
        **PRODUCTION_ENV,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip().splitlines()[-1] == "[]"
