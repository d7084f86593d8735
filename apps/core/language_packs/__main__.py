"""`python -m apps.core.language_packs [--catalogues]`: the shipped language codes, one line,
space-separated, in the packs' order; with `--catalogues`, those with a translation catalogue
(all but English, the source language). The Makefile reads its catalogue list from here."""

from __future__ import annotations

import sys

from apps.core.language_packs import codes
from apps.core.language_packs._pack import SOURCE_LANGUAGE

if __name__ == "__main__":
    shown = (
        [c for c in codes() if c != SOURCE_LANGUAGE] if "--catalogues" in sys.argv[1:] else codes()
    )
    sys.stdout.write(" ".join(shown) + "\n")
