#!/bin/sh
# Creates the virtualenv the `llm_server` tests run llama-cpp-python's server from
# (default .venv-llm; requirements/llm-server.txt), once: a venv whose stamp is newer than the
# requirements is left alone. Prints nothing else on success but pip's output.
#
# The interpreter: $LLM_PYTHON, else python3 — the server is a separate process, any Python
# llama-cpp-python supports will do (its built wheel is py3-none, so pip's cached build serves
# every version).
set -eu
cd "$(dirname "$0")/.."
VENV=${LLM_VENV:-.venv-llm}
REQ=requirements/llm-server.txt
STAMP="$VENV/.installed"

if [ -f "$STAMP" ] && [ "$STAMP" -nt "$REQ" ]; then
  exit 0
fi

py=${LLM_PYTHON:-python3}

rm -rf "$VENV"
"$py" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
touch "$STAMP"
