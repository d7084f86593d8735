"""The detection target: ≥ 95 % of the shipped short customer messages detected right, per
shipped language, and never a wrong language where the detector is unsure."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.core.languages import SHIPPED
from devtools.benchmarks.languages import TARGET, detection_figures, load_messages


def test_the_set_is_what_the_target_names():
    data = load_messages()
    assert set(data) == set(SHIPPED)
    for code, texts in data.items():
        assert len(texts) >= 20, code
        assert len(set(texts)) == len(texts), f"{code}: duplicates"
        for text in texts:
            assert 2 <= len(text.split()) <= 12, (code, text)


def test_at_least_95_percent_per_language():
    figures = detection_figures()
    for f in figures:
        assert f.rate >= TARGET, (f.code, f.rate, f.wrong)
    assert sum(len(f.wrong) for f in figures) == 0, [f.wrong for f in figures if f.wrong]


@pytest.mark.parametrize("candidates", [["en", "es", "he"], ["en", "fr", "de", "nl"]])
def test_the_clients_languages_do_no_harm_to_its_own(candidates):
    # A short message in one of the client's languages, judged among those only.
    for f in detection_figures(candidates=candidates):
        if f.code in candidates:
            assert f.rate >= TARGET, (f.code, f.rate, f.wrong)


def test_the_command_prints_the_figures():
    out = StringIO()
    call_command("bench_language_detection", "--repeat", "1", stdout=out)
    table = out.getvalue()
    assert "| language | messages | correct |" in table
    assert all(f"| {code} | 24 |" in table for code in SHIPPED)
