"""Throwaway Python packages for the discovery tests: written under a temporary folder that is
put on sys.path for the test, and forgotten (path and imported modules) afterwards."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_package(root: Path, name: str, modules: dict[str, str]) -> None:
    """The package `name` under `root`: an empty __init__ and one module per entry (name: text)."""
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, text in modules.items():
        (package / f"{module}.py").write_text(text)


@contextmanager
def importable(root: Path, prefix: str) -> Iterator[Path]:
    """`root` on sys.path for the block; afterwards the modules whose names start with `prefix`
    (the packages the test wrote) are dropped, so the next test imports its own afresh."""
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith(prefix)]:
            del sys.modules[name]
