"""A Spanish-speaking support lead, in a real browser: the plan page and a simulation report read
in Spanish — section and field names, choices, numbers in the Spanish way — and the report in
plain words."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests.browser.helpers import page_signed_in_as, shot
from tests.factories import ClientFactory, PlanFactory, UserFactory
from tests.simulations.factories_sim import make_finished_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def spanish_operator_page(browser: Any, live_server: Any) -> Any:
    user = UserFactory(is_superuser=True)
    user.language = "es"
    user.save(update_fields=["language"])
    return page_signed_in_as(
        browser, live_server.url, user, viewport={"width": 1400, "height": 1000}
    )


def test_the_plan_page_and_a_simulation_report_in_spanish(
    browser, live_server, db_lock, screenshots
):
    with db_lock:
        plan = PlanFactory(slug="pro", name="Pro")
        shop = ClientFactory(slug="tienda", name="Tienda", plan=plan)
        run = make_finished_run(shop, name="¿Deliberativo?")
        report = dict(run.report)
        report["sides"]["candidate"]["tokens_per_turn"] = 2069.4
        report["ratio"]["tokens_per_turn"] = 2.2993
        for side in report["sides"].values():
            side.update(cost_per_turn_usd="0", cost_usd="0", offline=True)
        run.report = report
        run.save(update_fields=["report"])
    page = spanish_operator_page(browser, live_server)

    page.goto(live_server.url + reverse("admin:clients_plan_change", args=[plan.pk]))
    expect(page.locator("html")).to_have_attribute("lang", "es")
    expect(page.get_by_role("heading", name="Modificar plan")).to_be_visible()
    expect(page.get_by_text("Modo de IA", exact=False).first).to_be_visible()
    expect(page.locator("#nav-sidebar")).to_contain_text("Facturación")
    expect(page.locator("#nav-sidebar")).to_contain_text("Uso diario")
    expect(page.locator("#nav-sidebar")).not_to_contain_text("Daily usage")
    expect(page.get_by_text("Adaptativo — autoevaluación", exact=False).first).to_be_visible()
    shot(page, screenshots, "plan-es.png")

    page.goto(live_server.url + reverse("admin:simulations_simulationrun_change", args=[run.pk]))
    summary = page.locator("#report-summary")
    expect(summary).to_contain_text("1 caso que hoy falla pasaría.")
    expect(page.locator("#report-ratio")).to_contain_text(
        "Tokens por turno: de 900 a 2\xa0100 (2,3 veces la referencia)"
    )
    expect(page.locator("#report-sides")).to_contain_text(
        "nada: respondió el modelo de demostración sin conexión"
    )
    expect(page.locator("#report-cases")).to_contain_text("fallaría")
    shot(page, screenshots, "simulation-report.png")
