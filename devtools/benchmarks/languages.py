"""The language-detection target: how often `apps.core.languages.detect` names the right
language for short customer messages (the shipped set in `data/language_detection.json`,
2–12 words, at least 20 per shipped language), and what a detection costs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from apps.core.languages import SHIPPED, detect

DATA = Path(__file__).resolve().parent / "data" / "language_detection.json"
TARGET = 0.95  # correct per language


@dataclass(frozen=True)
class LanguageFigures:
    code: str
    messages: int
    correct: int
    unsure: int  # detect() said "" (the conversation keeps its language)
    wrong: list[tuple[str, str]]  # (message, the language detected instead)
    mean_us: float  # mean detection time per message, warm detector

    @property
    def rate(self) -> float:
        return self.correct / self.messages if self.messages else 0.0


def load_messages() -> dict[str, list[str]]:
    messages: dict[str, list[str]] = json.loads(DATA.read_text(encoding="utf-8"))["messages"]
    return messages


def detection_figures(
    *, candidates: list[str] | None = None, repeat: int = 1
) -> list[LanguageFigures]:
    """Per shipped language: every message of the set through `detect` (with the client's
    allowed languages `candidates`; None = every shipped language), timed over `repeat`
    rounds after one warm-up round (lingua loads its models on first use)."""
    data = load_messages()
    for texts in data.values():
        for text in texts:
            detect(text, candidates=candidates)  # warm-up: models loaded, detector built
    figures = []
    for code in SHIPPED:
        texts = data.get(code, [])
        found = [detect(text, candidates=candidates) for text in texts]
        started = time.perf_counter()
        for _ in range(repeat):
            for text in texts:
                detect(text, candidates=candidates)
        elapsed = time.perf_counter() - started
        figures.append(
            LanguageFigures(
                code=code,
                messages=len(texts),
                correct=sum(1 for f in found if f == code),
                unsure=sum(1 for f in found if not f),
                wrong=[(t, f) for t, f in zip(texts, found, strict=True) if f and f != code],
                mean_us=elapsed / max(1, repeat * len(texts)) * 1e6,
            )
        )
    return figures


def markdown_table(figures: list[LanguageFigures]) -> str:
    lines = [
        "| language | messages | correct | unsure | wrong | correct % | µs per message |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for f in figures:
        lines.append(
            f"| {f.code} | {f.messages} | {f.correct} | {f.unsure} | {len(f.wrong)} | "
            f"{f.rate * 100:.1f} | {f.mean_us:.0f} |"
        )
    return "\n".join(lines)
