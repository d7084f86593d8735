"""What a long-running process built while starting, kept out of the garbage collector's way
(the Procfile's `web` and `worker`, docs/deployment.md).

Modules, classes, Django's app registry and URL patterns, the catalogues and the SDKs' models
live as long as the process, yet CPython's cyclic collector walks all of them (≈ 265,000
objects) in every full collection — ≈ 190 ms of CPU each on the project's 2-core VM, and the
younger collections grow with them. In a burst of turns those collections came to about a
tenth of a worker's CPU (docs/benchmarks.md). `settle()` imports what the process will import
on its first request or task anyway, collects once, then moves everything left to the
permanent generation (`gc.freeze()`): later collections walk only what requests and tasks
allocate. Objects made after it are collected as before; the frozen ones are never freed,
which costs nothing for objects that live as long as the process."""

from __future__ import annotations

import gc
import logging
from importlib import import_module

logger = logging.getLogger(__name__)

# Imported lazily by their packages on first use: a turn's first LLM call would import (and
# build the pydantic models of) the SDK's chat resources after the freeze.
LAZY_MODULES = ("openai.resources.chat.completions",)


def settle() -> int:
    """Import the URL conf (every view and what it imports) and the lazy modules, collect, and
    freeze what is left; returns the number of objects frozen."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (imports every view module)
    for name in LAZY_MODULES:
        try:
            import_module(name)
        except ImportError:  # pragma: no cover (a package without it: nothing to warm)
            logger.debug("heap: %s not importable", name)
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info("heap: %d objects frozen after start-up", frozen)
    return frozen
