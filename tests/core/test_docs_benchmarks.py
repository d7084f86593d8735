"""docs/benchmarks.md holds the current figures, each with the command that produces it; the
history of earlier runs lives in git, so the page stays short enough to read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"


def _sections() -> list[tuple[str, str]]:
    parts = re.split(r"^## ", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]
    return [(part.splitlines()[0], part) for part in parts]


def test_the_page_is_current_figures_not_a_lab_notebook() -> None:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 500, f"docs/benchmarks.md has {len(lines)} lines; keep the history in git"


def test_every_section_shows_the_command_that_produced_its_figures() -> None:
    sections = _sections()
    assert len(sections) >= 8
    for title, body in sections:
        assert "```sh" in body, f"section {title!r} has no command"
        assert re.search(r"^\|.*\|$", body, flags=re.MULTILINE), f"section {title!r} has no figures"


def test_every_benchmark_is_documented() -> None:
    """The scripts run by path and the `bench_*` management commands, all in
    devtools/benchmarks/."""
    text = PAGE.read_text(encoding="utf-8")
    home = ROOT / "devtools" / "benchmarks"
    scripts = [
        p.name
        for p in home.glob("*.py")
        if not p.name.endswith("_settings.py") and '__name__ == "__main__"' in p.read_text()
    ]
    commands = [p.stem for p in (home / "management" / "commands").glob("bench_*.py")]
    assert scripts
    assert commands
    missing = [name for name in scripts + commands if name not in text]
    assert not missing, f"benchmarks without a section in docs/benchmarks.md: {missing}"
