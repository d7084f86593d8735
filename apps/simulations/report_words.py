"""A simulation report (apps/simulations/report.py) in words a support lead reads: what would
change and why, with figures to two significant figures in the page's locale and the cost of a
conversation in money. The report's JSON stays as the API gives it; this is the admin page's
reading of it.

* "What changed": how many cases a candidate fixes, and for the ones it breaks, why — grouped
  by the first check that failed ("3 cases would fail: they need more model calls than the
  case allows");
* the side-by-side table: counts as counts, shares as percentages, money as money, every other
  figure to two significant figures; a side whose turns all ran on the offline demo model and
  cost nothing says so instead of printing 0;
* the comparison: each per-turn figure from the baseline to the candidate and how many times
  as much that is."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from apps.core.numbers import finite_decimal

__all__ = [
    "Comparison",
    "comparisons",
    "cost_per_conversation",
    "money",
    "side_table",
    "significant",
    "what_changed",
]


def significant(value: Any, digits: int = 2) -> str:
    """`value` rounded to `digits` significant figures, written in the active locale
    (2069 → "2,100" in English, "2.100" in Spanish; 4.0417 → "4.0" / "4,0")."""
    number = finite_decimal(value)
    if number is None:
        return "—"
    if number == 0:
        return number_format(0, use_l10n=True)
    exponent = math.floor(math.log10(abs(float(number))))
    places = digits - 1 - exponent
    rounded = number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    if places <= 0:
        return number_format(int(rounded), use_l10n=True, force_grouping=True)
    return number_format(rounded, decimal_pos=places, use_l10n=True, force_grouping=True)


def money(value: Any) -> str:
    """A dollar amount to two significant figures (a cent is too coarse for one turn)."""
    return _("%(amount)s USD") % {"amount": significant(value)}


def percent(value: Any) -> str:
    number = finite_decimal(value)
    if number is None:
        return "—"
    return _("%(percent)s %%") % {"percent": significant(number * 100)}


def cost_per_conversation(side: dict[str, Any]) -> Decimal | None:
    """What one simulated conversation (a case's attempt) cost on this side, on average: its
    turns' cost (cost per turn × turns) over the conversations."""
    per_turn = finite_decimal(side.get("cost_per_turn_usd"))
    turns = side.get("turns") or 0
    conversations = side.get("conversations") or side.get("cases") or 0
    if per_turn is None or not conversations:
        return None
    return per_turn * turns / conversations


def _free_offline(side: dict[str, Any], cost: Decimal | None) -> bool:
    return bool(side.get("offline")) and (cost is None or cost == 0)


def _cost_text(side: dict[str, Any], cost: Decimal | None) -> str:
    if _free_offline(side, cost):
        return _("nothing: the offline demo model answered, and it costs nothing")
    return money(cost) if cost is not None else "—"


def side_table(side_names: list[str], sides: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The rows of the side-by-side table: a label and one value per side."""

    def count(key: str) -> list[str]:
        return [
            number_format(sides[s][key], use_l10n=True, force_grouping=True)
            if sides[s].get(key) is not None
            else "—"
            for s in side_names
        ]

    def each(key: str, fmt: Any) -> list[str]:
        return [fmt(sides[s].get(key)) for s in side_names]

    return [
        (_("Cases"), count("cases")),
        (_("Passed (code checks)"), count("passed")),
        (_("Failed"), count("failed")),
        (_("Could not finish"), count("errors")),
        (_("Pass rate (code checks)"), each("pass_rate", percent)),
        (_("Cases that passed on every attempt"), each("pass_hat_k", percent)),
        (_("Attempts that passed (mean per case)"), each("pass_at_1", percent)),
        (_("Customer turns"), count("turns")),
        (_("Model calls per turn"), each("llm_calls_per_turn", significant)),
        (_("Tokens per turn"), each("tokens_per_turn", significant)),
        (
            _("Cost per conversation"),
            [_cost_text(sides[s], cost_per_conversation(sides[s])) for s in side_names],
        ),
        (
            _("Cost of the run"),
            [_cost_text(sides[s], finite_decimal(sides[s].get("cost_usd"))) for s in side_names],
        ),
        (_("Typical reply time (ms)"), each("latency_p50_ms", significant)),
        (_("Slowest replies, 95th percentile (ms)"), each("latency_p95_ms", significant)),
        (_("Handed to a person"), count("escalations")),
        (_("Tool runs"), count("tools_ran")),
    ]


@dataclass(frozen=True)
class Comparison:
    label: str
    before: str
    after: str
    times: str  # "" when there is no figure to divide by


def comparisons(sides: dict[str, Any], ratio: dict[str, Any]) -> list[Comparison]:
    """Each per-turn figure from the baseline to the candidate, and how many times as much."""
    base, cand = sides.get("baseline"), sides.get("candidate")
    if not base or not cand:
        return []
    rows: list[Comparison] = []
    for label, key, ratio_key in (
        (_("Model calls per turn"), "llm_calls_per_turn", "llm_calls_per_turn"),
        (_("Tokens per turn"), "tokens_per_turn", "tokens_per_turn"),
        (_("Slowest replies, 95th percentile (ms)"), "latency_p95_ms", "latency_p95"),
    ):
        times = ratio.get(ratio_key)
        rows.append(
            Comparison(
                label,
                significant(base.get(key)),
                significant(cand.get(key)),
                significant(times) if times is not None else "",
            )
        )
    before, after = cost_per_conversation(base), cost_per_conversation(cand)
    cost_times = ""  # none when both are free (the page then says it once)
    if before and after is not None:
        cost_times = significant(after / before)
    rows.append(
        Comparison(
            _("Cost per conversation"),
            _cost_text(base, before),
            _cost_text(cand, after),
            cost_times,
        )
    )
    return rows


# Why a case fails, by the expectation whose check failed first (apps/simulations/expectations.py).
def _fail_sentence(reason: str, n: int) -> str:
    if reason == "max_llm_calls":
        text = ngettext(
            "%(n)s case would fail: it needs more model calls than the case allows.",
            "%(n)s cases would fail: they need more model calls than the case allows.",
            n,
        )
    elif reason == "max_tokens":
        text = ngettext(
            "%(n)s case would fail: it uses more tokens than the case allows.",
            "%(n)s cases would fail: they use more tokens than the case allows.",
            n,
        )
    elif reason == "max_cost_usd":
        text = ngettext(
            "%(n)s case would fail: it costs more than the case allows.",
            "%(n)s cases would fail: they cost more than the case allows.",
            n,
        )
    elif reason == "error":
        text = ngettext(
            "%(n)s case would not finish: it stopped with an error.",
            "%(n)s cases would not finish: they stopped with an error.",
            n,
        )
    else:
        text = ngettext(
            "%(n)s case would fail: the assistant no longer does what the case expects (see "
            "the case below).",
            "%(n)s cases would fail: the assistant no longer does what the cases expect (see "
            "the cases below).",
            n,
        )
    return text % {"n": n}


def _reason(result: dict[str, Any] | None) -> str:
    if not result:
        return "other"
    if result.get("status") == "error":
        return "error"
    for check in result.get("failed_checks") or []:
        if isinstance(check, dict) and check.get("expect"):
            return str(check["expect"])
    return "other"


def what_changed(report: dict[str, Any]) -> list[str]:
    """The "What changed" sentences of a report that compares a candidate with the baseline."""
    summary = report.get("summary") or {}
    cases = report.get("cases") or []
    sentences: list[str] = []
    fixed = int(summary.get("fixed") or 0)
    if fixed:
        sentences.append(
            ngettext(
                "%(n)s case that fails today would pass.",
                "%(n)s cases that fail today would pass.",
                fixed,
            )
            % {"n": fixed}
        )
    reasons: dict[str, int] = {}
    for case in cases:
        if case.get("change") == "broke":
            reason = _reason(case.get("candidate"))
            reasons[reason] = reasons.get(reason, 0) + 1
    for reason, n in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        sentences.append(_fail_sentence(reason, n))
    same_pass = int(summary.get("unchanged_pass") or 0)
    if same_pass:
        sentences.append(
            ngettext("%(n)s case passes either way.", "%(n)s cases pass either way.", same_pass)
            % {"n": same_pass}
        )
    same_fail = int(summary.get("unchanged_fail") or 0)
    if same_fail:
        sentences.append(
            ngettext("%(n)s case fails either way.", "%(n)s cases fail either way.", same_fail)
            % {"n": same_fail}
        )
    return sentences
