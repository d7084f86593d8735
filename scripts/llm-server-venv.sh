#!/bin/sh
# Creates the virtualenv the `llm_server` tests run llama-cpp-python's server from
# (default .venv-llm; requirements/llm-server.txt), once: a venv whose stamp is newer than the
# requirements is left alone. Prints nothing else on success but pip's output.
#
# The interpreter: $LLM_PYTHON, else python3 — the server is a separate process, any Python
# llama-cpp-python supports will do.
#
# llama.cpp is built portable (GGML_NATIVE=OFF, picking CPU features at run time) and never from
# pip's wheel cache: a native build (-march=native) compiled on one machine, or on a VM whose CPU
# flags promise more than the host runs, dies with "Illegal instruction" (exit 132) on the first
# grammar-constrained reply. Set CMAKE_ARGS to override the flags.
set -eu
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
VENV=${LLM_VENV:-.venv-llm}
REQ=requirements/llm-server.txt
STAMP="$VENV/.installed"

if [ -f "$STAMP" ] && [ "$STAMP" -nt "$REQ" ] && [ "$STAMP" -nt "$SELF" ]; then
  exit 0
fi

py=${LLM_PYTHON:-python3}

rm -rf "$VENV"
"$py" -m venv "$VENV"
CMAKE_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=OFF} \
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$REQ"
touch "$STAMP"
