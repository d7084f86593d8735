"""The benchmark commands' smoke tests: a command run in the test database, its output read."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import call_command


def bench(command: str, turns: int, **options: Any) -> tuple[str, str]:
    """Run the benchmark `command` for `turns` turns in the test's own database, with no
    progress bar: what it printed and what it warned."""
    out, err = StringIO(), StringIO()
    call_command(
        command,
        turns=turns,
        in_current_database=True,
        no_progress=True,
        stdout=out,
        stderr=err,
        **options,
    )
    return out.getvalue(), err.getvalue()
