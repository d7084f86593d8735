"""A smoke test of `manage.py bench_modes` with a tiny number of turns."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.billing.models import UsageRecord
from apps.clients.models import Client

pytestmark = pytest.mark.django_db


def test_bench_modes_runs_the_mix_through_both_modes_and_cleans_up() -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "bench_modes",
        turns=5,
        in_current_database=True,
        no_progress=True,
        markdown=True,
        stdout=out,
        stderr=err,
    )
    text = out.getvalue()
    assert "per mode: 3 simple / 1 context / 1 risky" in text
    for label in ("simple question", "needs extra context", "risky action", "weighted mix"):
        assert label in text
    ratio = text.split("adaptive ÷ standard: ")[1].split(" ")[0]
    assert 0 < float(ratio) < 1  # adaptive is cheaper on the demo tenant
    assert "did not run as scripted" not in err.getvalue()
    # the two throwaway tenants are gone
    assert not Client.objects.filter(slug__startswith="bench-").exists()
    assert not UsageRecord.objects.exists()
