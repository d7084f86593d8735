"""The simulation report in words a support lead reads (apps/simulations/report_words.py): why
cases would fail, figures to two significant figures in the page's locale, the cost of a
conversation in money, and an offline model that costs nothing said in words, not as 0."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation

from apps.simulations.report import report_build
from apps.simulations.report_words import significant, what_changed
from tests.languages.test_spanish_staff_pages import text_nodes
from tests.simulations.factories_sim import make_finished_run, side_stats

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(client, client_a):
    from django.contrib.auth.models import Permission

    from apps.accounts.models import Role
    from tests.factories import MembershipFactory

    user = MembershipFactory(client=client_a, role=Role.AGENT).user
    user.user_permissions.add(*Permission.objects.all())
    client.force_login(user)
    client.staff_user = user
    return client


@pytest.mark.parametrize(
    ("value", "english", "spanish"),
    [
        (2069, "2,100", "2\xa0100"),  # Django's Spanish groups with a no-break space
        (4.0417, "4.0", "4,0"),
        (13.1759, "13", "13"),
        ("0.000125", "0.00013", "0,00013"),
        (0, "0", "0"),
        (None, "—", "—"),
    ],
)
def test_figures_have_two_significant_figures_in_the_page_locale(value, english, spanish):
    with translation.override("en"):
        assert significant(value) == english
    with translation.override("es"):
        assert significant(value) == spanish


def broke_case(name: str, expect: str) -> dict[str, Any]:
    check = {"turn": None, "expect": expect, "passed": False, "detail": "x"}
    return {
        "name": name,
        "baseline": {"status": "passed", "failed_checks": []},
        "candidate": {"status": "failed", "failed_checks": [check]},
        "change": "broke",
    }


def test_broken_cases_are_told_by_why_they_fail():
    report = {
        "summary": {"fixed": 1, "broke": 4, "unchanged_pass": 2, "unchanged_fail": 0},
        "cases": [
            *(broke_case(f"calls-{n}", "max_llm_calls") for n in range(3)),
            broke_case("tool", "tool_called"),
        ],
    }
    with translation.override("en"):
        assert what_changed(report) == [
            "1 case that fails today would pass.",
            "3 cases would fail: they need more model calls than the case allows.",
            "1 case would fail: the assistant no longer does what the case expects (see the "
            "case below).",
            "2 cases pass either way.",
        ]
    with translation.override("es"):
        sentences = what_changed(report)
    assert sentences[1] == (
        "3 casos fallarían: necesitan más llamadas al modelo de las que permite el caso."
    )


def test_the_report_page_speaks_plainly(agent, client_a):
    run = make_finished_run(client_a)
    report = dict(run.report)
    report["sides"]["candidate"]["llm_calls_per_turn"] = 26.3518
    report["ratio"]["llm_calls_per_turn"] = 13.1759
    report["sides"]["candidate"]["tokens_per_turn"] = 2069.4
    report["cases"][0]["candidate"]["failed_checks"] = [
        {"turn": None, "expect": "max_llm_calls", "passed": False, "detail": "x"}
    ]
    run.report = report
    run.save(update_fields=["report"])
    html = agent.get(reverse("admin:simulations_simulationrun_change", args=[run.pk])).content
    text = html.decode()
    assert "1 case would fail: it needs more model calls than the case allows." in text
    assert "1 case that fails today would pass." in text
    assert "Model calls per turn: from 2.0 to 26 (13 times as much)" in text
    assert "2,100" in text  # tokens per turn, two significant figures
    # two conversations of two turns at $0.0002 a turn: $0.0004 each
    assert "Cost per conversation: from 0.00040 USD to 0.00040 USD (1.0 times as much)" in text
    # what a person reads (the CSS class gd-broke is not), without the case's name
    shown = " ".join(text_nodes(text)).replace("broke-one", "")
    for old in ("broke", "pass^k", "pass@1", "×", "13.1759", "26.3518"):
        assert old not in shown, old


def test_the_report_page_in_spanish_formats_numbers_the_spanish_way(agent, client_a):
    run = make_finished_run(client_a)
    report = dict(run.report)
    report["sides"]["candidate"]["tokens_per_turn"] = 2069.4
    report["ratio"]["tokens_per_turn"] = 4.0417
    run.report = report
    run.save(update_fields=["report"])
    agent.staff_user.language = "es"
    agent.staff_user.save(update_fields=["language"])
    text = agent.get(reverse("admin:simulations_simulationrun_change", args=[run.pk])).content
    body = text.decode()
    assert "Tokens por turno: de 900 a 2\xa0100 (4,0 veces la referencia)" in body
    assert "4,0417" not in body and "×" not in body


def test_an_offline_model_that_costs_nothing_is_said_not_printed_as_zero(agent, client_a):
    run = make_finished_run(client_a)
    report = dict(run.report)
    for side in report["sides"].values():
        side.update(cost_per_turn_usd="0", cost_usd="0", offline=True)
    run.report = report
    run.save(update_fields=["report"])
    body = agent.get(reverse("admin:simulations_simulationrun_change", args=[run.pk])).content
    text = body.decode()
    assert "nothing: the offline demo model answered, and it costs nothing" in text
    assert "0 USD" not in text
    assert (
        "Cost per conversation: nothing: the offline demo model answered, and it costs nothing<"
        in text
    )


def test_a_paid_model_that_costs_nothing_still_shows_its_cost():
    side = side_stats(1, 0) | {"cost_per_turn_usd": "0", "cost_usd": "0", "offline": False}
    from apps.simulations.report_words import side_table

    with translation.override("en"):
        rows = dict(side_table(["candidate"], {"candidate": side}))
    assert rows["Cost per conversation"] == ["0 USD"]


def test_the_report_records_whether_every_turn_ran_offline(client_a):
    run = make_finished_run(client_a)
    case_runs = list(run.case_runs.all())
    for case_run in case_runs:
        case_run.transcript = [dict(t, offline=True) for t in case_run.transcript]
    report = report_build(run=run, case_runs=case_runs)
    assert report["sides"]["candidate"]["offline"] is True
    assert report["sides"]["candidate"]["conversations"] == 2
    case_runs[0].transcript = [dict(t, offline=False) for t in case_runs[0].transcript]
    report = report_build(run=run, case_runs=case_runs)
    assert False in {side["offline"] for side in report["sides"].values()}
