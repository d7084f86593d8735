"""A smoke test of `manage.py bench_deliberative` with a tiny number of turns."""

from __future__ import annotations

import pytest

from apps.billing.models import UsageRecord
from apps.clients.models import Client
from tests.benchmarks.conftest import bench

pytestmark = pytest.mark.django_db


def test_bench_deliberative_compares_the_modes_and_counts_terminations() -> None:
    text, _ = bench("bench_deliberative", 5)
    assert "5 turns per mode (3 simple / 1 context / 1 risky)" in text
    rows = {
        tuple(c.strip() for c in line.strip("|").split("|")[:2]): line
        for line in text.splitlines()
        if line.startswith("| weighted mix")
    }
    adaptive = rows[("weighted mix (60/20/20)", "adaptive")].split("|")
    deliberative = rows[("weighted mix (60/20/20)", "deliberative")].split("|")
    assert float(adaptive[3]) < 3 <= float(deliberative[3])  # LLM calls per turn
    assert float(deliberative[-2]) > 1  # costs more than adaptive
    turns_by_reason = [
        int(line.split("|")[2]) for line in text.splitlines() if line.startswith("| `")
    ]
    assert sum(turns_by_reason) == 5
    assert "Unexpected turns" not in text
    # The cached share per step: the loop's calls re-use the previous call's prompt.
    per_step = {
        tuple(c.strip() for c in line.strip("|").split("|")[:2]): line.split("|")
        for line in text.splitlines()
        if line.startswith("| deliberative | `")
    }

    def share(step: str) -> int:
        return int(per_step[("deliberative", f"`{step}`")][5].strip().rstrip("%"))

    assert int(per_step[("deliberative", "`reason_step`")][3]) >= 4 * 5
    # Within a turn every call appends to the previous one's prompt: the synthesis (the whole
    # loop) and the refinement (the shared prefix) come mostly from the cache (the refinement's
    # share is the lower one: the prefix holds the excerpts, which the stop-word query keeps
    # shorter — 78 % on PostgreSQL, 87 % for the synthesis) …
    assert share("synthesize") >= 80 and share("improve") >= 75
    # … and so do the loop's steps but the first of each turn, which pays for the turn's own
    # part (the sections chosen for the message, the conversation, the excerpts).
    assert share("reason_step") >= 60
    # The usage records' cost equals the scripted provider's own invoice, cached tokens in.
    invoices = [
        line.split("|")[2:4] for line in text.splitlines() if line.startswith("| deliberative | 0.")
    ]
    assert len(invoices) == 1 and invoices[0][0].strip() == invoices[0][1].strip()
    assert not Client.objects.filter(slug__startswith="bench-").exists()
    assert not UsageRecord.objects.unscoped("test checks the database directly").exists()
