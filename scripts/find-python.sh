#!/bin/sh
# Prints the path of a Python >= 3.12 (Django 6 needs it). Honours $PYTHON if set.
# Looks on PATH first, then in pyenv's and the usual install locations.
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
if [ -n "${PYTHON:-}" ]; then
  if ok "$PYTHON"; then echo "$PYTHON"; exit 0; fi
  echo "PYTHON=$PYTHON is not Python >= 3.12" >&2; exit 1
fi
for cand in python3.14 python3.13 python3.12 python3 python; do
  p=$(command -v "$cand" 2>/dev/null) || continue
  if ok "$p"; then echo "$p"; exit 0; fi
done
for p in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9] 2>/dev/null | sort -rV); do
  if ok "$p"; then echo "$p"; exit 0; fi
done
echo "GuideDesk needs Python 3.12 or newer (Django 6). Install it, or set PYTHON=/path/to/python3.12." >&2
exit 1
