"""The repository's docs are the design's source: nothing in it points to a document outside the
repository (a design file, a shared folder, seed notes, an issue tracker's numbers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.reasoning import steps
from tests.conftest import ROOT

OUTSIDE = re.compile(
    r"DESIGN\.md|CONVENTIONS\.md|\.\./shared|shared/seeds|seeds/|\bissue \d+", re.I
)
FOLDERS = [
    "apps",
    "config",
    "docs",
    "templates",
    "static",
    "tests",
    "devtools",
    "scripts",
    "demo",
]
TOP_FILES = ["README.md", "Makefile", "Procfile", "pyproject.toml"]
SUFFIXES = {".py", ".md", ".html", ".js", ".css", ".json", ".toml", ".txt", ".sh", ""}
# Landed migrations are never edited, their docstrings included.
SKIP = {Path(__file__).resolve()}


def repo_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES]
    for folder in FOLDERS:
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
        ]
    return [f for f in files if f.resolve() not in SKIP and "migrations" not in f.parts]


def test_nothing_points_outside_the_repository():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in repo_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("step", steps.names())
def test_every_step_has_its_section_in_the_llm_protocol(step: str) -> None:
    """The generated table lists the fields; the field meanings are written by hand, in a
    section headed with the step's name."""
    protocol = (ROOT / "docs" / "llm-protocol.md").read_text(encoding="utf-8")
    assert re.search(rf"^#+ `{step}`", protocol, re.M), f"no section for step {step!r}"
