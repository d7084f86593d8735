"""Confirmations in every language: on the labelled corpus in
tests/reasoning/confirm_phrases/<lang>.json, how many answers that are not a clear yes the
typed-answer rule (`apps.reasoning.guards.confirmation_reading`) reads as a yes (the target is
0), how many clear yes it accepts (target ≥ 95 %), how many clear no it reads as no, how many
unclear answers it asks again, and what the Yes/No buttons (the structured answer) get right —
per shipped language.

Run from the project root:

    .venv/bin/python devtools/benchmarks/confirm_phrases.py [--misses]

It prints a Markdown table (and, with --misses, every clear yes not accepted, every false yes
and every clear no not read as no). No database, no model: the rule is a pure function.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
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
    rows = []
    misses: list[str] = []
    readings = 0
    reading_seconds = 0.0
    pressed = {"yes": PendingActionStatus.CONFIRMED, "no": PendingActionStatus.DECLINED}
    for code in SHIPPED:
        data: dict[str, Any] = json.loads((PHRASES / f"{code}.json").read_text("utf-8"))
        params, tool = data["params"], data["tool"]
        n = {"yes": 0, "accepted": 0, "no": 0, "read_no": 0, "other": 0, "false_yes": 0}
        asked_again = buttons = 0
        for item in data["answers"]:
            started = time.perf_counter()
            reading = confirmation_reading(
                item["text"], item.get("params", params), item.get("tool", tool)
            )
            reading_seconds += time.perf_counter() - started
            readings += 1
            label = item["label"]
            if label == "clear_yes":
                n["yes"] += 1
                n["accepted"] += reading.answer == "yes"
                if reading.answer != "yes":
                    misses.append(f"{code} clear_yes {item['text']!r}: {reading.reason}")
            else:
                n["other"] += 1
                n["false_yes"] += reading.answer == "yes"
                asked_again += reading.reask
                if reading.answer == "yes":
                    misses.append(f"{code} {label} {item['text']!r}: READ AS YES")
            if label == "clear_no":
                n["no"] += 1
                n["read_no"] += reading.answer == "no"
                if reading.answer != "no":
                    misses.append(f"{code} clear_no {item['text']!r}: {reading.answer}")
            # the same message with a button pressed: the structured answer, whatever the text
            for answer, status in pressed.items():
                question = OpenQuestion(
                    params=params,
                    shown_before=True,
                    expired=False,
                    first_reply=True,
                    another_confirmed=False,
                    action_id=1,
                    digest=params_digest(params),
                    structured=StructuredAnswer(1, params_digest(params), answer),
                    tool=tool,
                )
                buttons += confirmation_decision(question, item["text"]) == status
        rows.append((code, len(data["answers"]), n, asked_again, buttons))

    out = sys.stdout.write
    out("| | " + " | ".join(r[0] for r in rows) + " |\n")
    out("|---|" + "---:|" * len(rows) + "\n")
    out("| answers | " + " | ".join(str(r[1]) for r in rows) + " |\n")
    out("| false yes (not clear_yes, read as yes) | ")
    out(" | ".join(f"{r[2]['false_yes']}/{r[2]['other']}" for r in rows) + " |\n")
    out("| clear yes accepted | ")
    out(" | ".join(f"{100 * r[2]['accepted'] / r[2]['yes']:.0f} %" for r in rows) + " |\n")
    out("| clear no read as no | ")
    out(" | ".join(f"{r[2]['read_no']}/{r[2]['no']}" for r in rows) + " |\n")
    out("| not yes, asked again | ")
    out(" | ".join(f"{r[3]}/{r[2]['other']}" for r in rows) + " |\n")
    out("| by the buttons | " + " | ".join(f"{r[4]}/{2 * r[1]}" for r in rows) + " |\n")
    total = sum(r[1] for r in rows)
    out(
        f"\n{total} answers; {sum(r[2]['false_yes'] for r in rows)} false yes; "
        f"{sum(r[2]['accepted'] for r in rows)}/{sum(r[2]['yes'] for r in rows)} clear yes "
        f"accepted; {1e6 * reading_seconds / readings:.0f} µs per reading; the vocabulary of "
        f"all languages is built once per process ({1e3 * built:.0f} ms).\n"
    )
    if args.misses:
        out("\n" + "\n".join(misses or ["(none)"]) + "\n")


if __name__ == "__main__":
    main()
