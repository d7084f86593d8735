"""What the benchmarks' management commands share: the options of a run the test suite drives
too, and a progress bar on stderr around a run whose failure becomes the command's error."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from django.core.management.base import CommandError, CommandParser
from tqdm import tqdm

from devtools.benchmarks.modes import BenchmarkError

IN_CURRENT_DATABASE = "Work in the configured database (meant for the test suite)."


def add_run_options(parser: CommandParser, in_current_database: str = IN_CURRENT_DATABASE) -> None:
    """`--no-progress`, and `--in-current-database` (described by `in_current_database`)."""
    parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
    parser.add_argument("--in-current-database", action="store_true", help=in_current_database)


@contextlib.contextmanager
def progress_bar(
    options: dict[str, Any], desc: str, unit: str, total: int | None = None
) -> Iterator[Callable[..., Any]]:
    """A progress bar on stderr (none with `--no-progress`) for the run inside: yields its
    `update`, closes it afterwards, and turns a `BenchmarkError` into a `CommandError`."""
    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=options["no_progress"])
    try:
        yield bar.update
    except BenchmarkError as exc:
        raise CommandError(str(exc)) from None
    finally:
        bar.close()
