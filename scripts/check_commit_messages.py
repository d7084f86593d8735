#!/usr/bin/env python3
"""Check the commit messages since a base commit: `area: what changed` in at most 72
characters, a blank line, then a body that says why.

    python scripts/check_commit_messages.py [--since REV]

The default base is the first commit held to this rule; older history is left as it is. A clone
too shallow to contain the base checks what it has. Exits 1 and lists every offending commit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

FIRST_CHECKED_PARENT = "cb0f288"
SUBJECT = re.compile(r"^[a-z0-9][a-z0-9_./,+ -]*: \S")
MAX_SUBJECT = 72


def _git(*args: str) -> str:
    return subprocess.run(  # noqa: S603 - fixed git arguments, no shell
        ["git", *args],  # noqa: S607 - git from PATH, as the developer runs it
        check=True,
        capture_output=True,
        text=True,
        encoding="utf-8",
    ).stdout


def problems(message: str) -> list[str]:
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject is {len(subject)} characters (at most {MAX_SUBJECT})")
    if not SUBJECT.match(subject) and not subject.startswith("Merge "):
        found.append("subject is not `area: what changed`")
    if len(lines) < 3 or lines[1].strip() or not any(line.strip() for line in lines[2:]):
        found.append("no body after a blank line (say why)")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", default=FIRST_CHECKED_PARENT)
    args = parser.parse_args()
    try:
        _git("cat-file", "-e", f"{args.since}^{{commit}}")
        revs = f"{args.since}..HEAD"
    except subprocess.CalledProcessError:
        print(f"{args.since} is not in this clone; checking the commits it has")
        revs = "HEAD"
    log = _git("log", "--format=%H%x00%B%x1e", revs)
    bad = 0
    checked = 0
    for record in filter(None, (r.strip("\n") for r in log.split("\x1e"))):
        sha, _, message = record.partition("\x00")
        checked += 1
        for problem in problems(message):
            bad += 1
            print(f"{sha[:10]} {message.splitlines()[0][:60]!r}: {problem}")
    print(f"{checked} commit messages checked, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
