"""Helpers for the tests of tests/core that load settings in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def run_python(
    code: str, env: dict[str, str], *, timeout: int, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `code` with `python -c` at the repository root, with exactly the variables of `env`;
    stdout and stderr are captured as text."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )
