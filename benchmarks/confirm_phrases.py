"""Confirmations in every language: how many natural ways of saying yes or no the typed-answer
rule (`apps.reasoning.guards.confirmation_answer`) reads right, how many adversarial answers it
wrongly reads as a yes, and what the Yes/No buttons (the structured answer) get right — per
shipped language, from the lists in tests/reasoning/confirm_phrases/<lang>.json.

Run from the project root:

    .venv/bin/python benchmarks/confirm_phrases.py [--misses]

It prints a Markdown table (and, with --misses, every phrasing not read as listed and every
adversarial answer read as a yes). No database, no model: the rule is a pure function.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PHRASES = ROOT / "tests" / "reasoning" / "confirm_phrases"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="list what was read wrong")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django

    django.setup()
    from apps.core.languages import SHIPPED
    from apps.reasoning.confirmations import vocabulary
    from apps.reasoning.guards import confirmation_decision, confirmation_reading
    from apps.tools.models import PendingActionStatus
    from apps.tools.pending import OpenQuestion, StructuredAnswer, params_digest

    built = time.perf_counter()
    vocabulary()  # built once per process
    built = time.perf_counter() - built
    lists = {code: json.loads((PHRASES / f"{code}.json").read_text("utf-8")) for code in SHIPPED}
    rows = []
    misses: list[str] = []
    readings = 0
    reading_seconds = 0.0
    for code in SHIPPED:
        data: dict[str, Any] = lists[code]
        params = data["params"]
        right = buttons = 0
        for item in data["phrasing"]:
            started = time.perf_counter()
            reading = confirmation_reading(item["text"], item.get("params", params))
            reading_seconds += time.perf_counter() - started
            readings += 1
            if reading.answer == item["answer"]:
                right += 1
            else:
                misses.append(f"{code} {item['text']!r}: {reading.answer} ({reading.reason})")
            # the same answer by a button: the structured answer, whatever the text
            question = OpenQuestion(
                params=params,
                shown_before=True,
                expired=False,
                first_reply=True,
                another_confirmed=False,
                action_id=1,
                digest=params_digest(params),
                structured=StructuredAnswer(1, params_digest(params), item["answer"]),
            )
            expected = {"yes": PendingActionStatus.CONFIRMED, "no": PendingActionStatus.DECLINED}
            buttons += confirmation_decision(question, item["text"]) == expected[item["answer"]]
        false_yes = 0
        for item in data["adversarial"]:
            started = time.perf_counter()
            reading = confirmation_reading(item["text"], item.get("params", params))
            reading_seconds += time.perf_counter() - started
            readings += 1
            if reading.answer == "yes":
                false_yes += 1
                misses.append(f"{code} adversarial {item['text']!r}: read as a yes")
        n, m = len(data["phrasing"]), len(data["adversarial"])
        rows.append((code, n, right, buttons, m, false_yes))

    out = sys.stdout.write
    out("| | " + " | ".join(r[0] for r in rows) + " |\n")
    out("|---|" + "---:|" * len(rows) + "\n")
    out("| phrasings read right | " + " | ".join(f"{r[2]}/{r[1]}" for r in rows) + " |\n")
    out("| by the buttons | " + " | ".join(f"{r[3]}/{r[1]}" for r in rows) + " |\n")
    out("| adversarial read as a yes | " + " | ".join(f"{r[5]}/{r[4]}" for r in rows) + " |\n")
    total_n = sum(r[1] for r in rows)
    total_right = sum(r[2] for r in rows)
    out(
        f"\n{total_right}/{total_n} phrasings read right "
        f"({100 * total_right / total_n:.1f} %), "
        f"{sum(r[5] for r in rows)}/{sum(r[4] for r in rows)} adversarial answers read as a yes; "
        f"{1e6 * reading_seconds / readings:.0f} µs per reading; the vocabulary of all "
        f"languages is built once per process ({1e3 * built:.0f} ms).\n"
    )
    if args.misses:
        out("\n" + "\n".join(misses or ["(none)"]) + "\n")


if __name__ == "__main__":
    main()
