"""What GuideDesk itself says about a tool (apps/tools/wording.py): the tool's display name and
labels per language in the confirmation question, a result told as a sentence with amounts by
the language's rules, refusals by code in the customer's language, and the import, admin and
webhook sides of the same data."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation

from apps.core.exceptions import ApplicationError
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from apps.reasoning.guards import confirmation_text, reask_text, refusal_text
from apps.tools import wording
from apps.tools.executors import webhook as webhook_executor
from apps.tools.models import ClientTool
from tests.conftest import DEMO_TENANT

ENGLISH_NAMES = ("cancel order", "cancel_order", "order id", "order_id")


def demo_tool(name: str) -> ClientTool:
    """A demo tool as the demo tenant file defines it (display names and labels included)."""
    [spec] = [t for t in load_tenant_file(DEMO_TENANT)["clients"][0]["tools"] if t["name"] == name]
    return ClientTool(
        name=spec["name"],
        kind=spec["kind"],
        display_name=spec.get("display_name", {}),
        labels=spec.get("labels", {}),
        parameters=spec["parameters"],
    )


REFUND_RESULT: dict[str, Any] = {
    "order_id": "TH-12346",
    "refund_id": "RF-422311",
    "amount": "1425.76",
    "currency": "USD",
    "status": "submitted",
    "eta_days": 5,
}


# -- the confirmation question ------------------------------------------------------------------


def test_the_spanish_confirmation_uses_the_display_name_and_labels():
    with translation.override("es"):
        text = confirmation_text(demo_tool("cancel_order"), {"order_id": "TH-12345"})
    assert text.startswith("Solo para confirmar: ¿desea que realice la acción «Cancelar el pedido»")
    assert "(número de pedido: TH-12345)" in text
    assert "Responda «sí»" in text
    assert not any(english in text.lower() for english in ENGLISH_NAMES), text


@pytest.mark.parametrize(
    ("language", "name", "label"),
    [
        ("en", "Cancel order", "order number"),
        ("de", "Bestellung stornieren", "Bestellnummer"),
        ("fr", "Annuler la commande", "numéro de commande"),
        ("he", "ביטול הזמנה", "מספר הזמנה"),
        ("ar", "إلغاء الطلب", "رقم الطلب"),
        ("pt-br", "Cancelar o pedido", "número do pedido"),  # the base language's
    ],
)
def test_every_language_reads_its_own_name_and_labels(language, name, label):
    tool = demo_tool("cancel_order")
    with translation.override(language):
        question = confirmation_text(tool, {"order_id": "TH-12345"})
        again = reask_text(tool, {"order_id": "TH-12345"})
    for text in (question, again):
        assert name in text and label in text and "TH-12345" in text
        assert "cancel_order" not in text and "order id" not in text


def test_a_tool_without_names_is_humanised_inside_the_translated_sentence():
    tool = ClientTool(name="close_account", kind="destructive")
    with translation.override("es"):
        text = confirmation_text(tool, {"account_ref": "A-1"})
        bare = confirmation_text(tool, {})
    assert text.startswith("Solo para confirmar: ¿desea que realice la acción «Close account»")
    assert "(account ref: A-1)" in text
    assert "«Close account»?" in bare and "()" not in bare


def test_the_refusal_lists_what_the_assistant_can_do_by_display_name():
    from apps.reasoning.guards import GuardVerdict

    tools = [demo_tool("get_order_status"), demo_tool("track_shipment")]
    with translation.override("es"):
        text = refusal_text(GuardVerdict("refuse", "unknown_tool"), tools)
    assert "Consultar el estado del pedido, Seguir el envío" in text
    assert "get order status" not in text


# -- results ------------------------------------------------------------------------------------


def test_a_result_is_a_sentence_with_labels_and_amounts_by_the_language():
    tool = demo_tool("request_refund")
    params = {"order_id": "TH-12346", "reason": "dañado"}
    with translation.override("es"):
        spanish = wording.result_text(tool, params, REFUND_RESULT)
    with translation.override("en"):
        english = wording.result_text(tool, params, REFUND_RESULT)
    assert spanish == (
        "Listo: he completado «Solicitar un reembolso». Los detalles: número de reembolso: "
        "RF-422311; importe: 1.425,76\xa0US$; estado: enviada; plazo previsto (días hábiles): 5."
    )
    assert english.startswith("Done: I've completed “Request a refund” for you.")
    assert "amount: $1,425.76" in english
    # Not the log it replaced: no field names, no repeated order number, no bare currency code.
    for text in (spanish, english):
        for log in ("refund_id", "refund id", "eta days", "order id", "TH-12346", "USD"):
            assert log not in text


def test_french_typography_puts_a_space_before_the_colon():
    with translation.override("fr"):
        text = confirmation_text(demo_tool("cancel_order"), {"order_id": "TH-12345"})
    assert "(numéro de commande : TH-12345)" in text


def test_an_empty_result_is_still_a_sentence():
    with translation.override("de"):
        text = wording.result_text(demo_tool("cancel_order"), {"order_id": "TH-1"}, {})
    assert text == "Erledigt: Ich habe „Bestellung stornieren“ für Sie ausgeführt."


@pytest.mark.parametrize(
    ("value", "currency", "language", "shown"),
    [
        ("425.76", "USD", "es", "425,76\xa0US$"),
        (425.5, "", "de", "425,5"),
        ("1425.76", "EUR", "fr", "1\u202f425,76\xa0€"),
        (12345, "", "en", "12345"),  # whole numbers (ids, counts) are left as they are
        ("TH-12345", "USD", "es", "TH-12345"),
        (True, "", "es", "sí"),
    ],
)
def test_values_follow_the_language_rules(value, currency, language, shown):
    with translation.override(language):
        assert wording.value_text(value, currency=currency) == shown


# -- refusals -----------------------------------------------------------------------------------


def test_a_refusal_code_is_told_in_the_customers_language():
    tool = demo_tool("cancel_order")
    english_error = "Order TH-12346 has already been delivered. It can't be cancelled."
    with translation.override("es"):
        text = wording.error_text(
            tool, {"order_id": "TH-12346"}, error=english_error, code="already_delivered"
        )
    assert text == "Eso ya no es posible: el pedido ya se ha entregado."


def test_an_uncoded_refusal_is_shown_as_written_only_in_the_business_language():
    tool = demo_tool("cancel_order")
    error = "Orders placed with a voucher can't be cancelled online."
    with translation.override("en"):
        english = wording.error_text(tool, {}, error=error, business_language="en")
    with translation.override("es"):
        spanish = wording.error_text(tool, {}, error=error, business_language="en")
    assert english == f"Sorry, I couldn't complete that: {error}"
    assert error not in spanish
    assert spanish.startswith("Lo siento, no he podido completar «Cancelar el pedido»")


def test_the_webhook_reply_carries_a_known_shaped_code():
    parse = webhook_executor._parse_reply
    body = {"ok": False, "error": "Order TH-1 has already shipped.", "code": "already_shipped"}
    assert parse(json.dumps(body).encode()) == (
        False,
        None,
        "Order TH-1 has already shipped.",
        "already_shipped",
    )
    odd = {"ok": False, "error": "No.", "code": "DROP TABLE; --"}
    assert parse(json.dumps(odd).encode())[3] == ""  # not a code: worded as one without


# -- the tool definition: import and admin ------------------------------------------------------


@pytest.mark.django_db
def test_the_import_stores_names_and_labels():
    data = load_tenant_file(DEMO_TENANT)
    tenant_import(data=data)
    tool = ClientTool.objects.unscoped("test reads the imported tool").get(name="cancel_order")
    assert tool.display_name["es"] == "Cancelar el pedido"
    assert tool.labels["ar"]["order_id"] == "رقم الطلب"
    assert set(tool.display_name) == {"en", "es", "fr", "de", "pt", "it", "nl", "he", "ar"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("display_name", {"spanish": "Cancelar"}, "'spanish' is not a language code"),
        ("display_name", {"es": ""}, "display_name.es: must be a text"),
        ("labels", {"es": "número"}, "labels.es: must be an object"),
        ("labels", {"es": {"order_id": 5}}, "labels.es.order_id: must be a text"),
    ],
)
def test_the_import_rejects_malformed_names_and_changes_nothing(field, value, message):
    data = copy.deepcopy(load_tenant_file(DEMO_TENANT))
    data["clients"][0]["tools"][3][field] = value
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=data)
    assert message in exc.value.message
    assert not ClientTool.objects.unscoped("test checks nothing was imported").exists()


@pytest.mark.django_db
def test_the_admin_edits_names_and_labels_and_refuses_bad_ones(admin_client, client_a):
    from tests.factories import ClientToolFactory

    tool = ClientToolFactory(client=client_a, name="cancel_order", kind="destructive")
    url = reverse("admin:tools_clienttool_change", args=[tool.pk])
    page = admin_client.get(url)
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None}
    data.update(
        {
            "client": client_a.pk,
            "parameters": json.dumps(tool.parameters),
            "approval_rule": "",
            "display_name": json.dumps({"es": "Cancelar el pedido"}),
            "labels": json.dumps({"es": {"order_id": "número de pedido"}}),
            "kind": "destructive",
            "executor_type": tool.executor_type,
            "webhook_url": tool.webhook_url,
            "timeout_seconds": tool.timeout_seconds,
            "max_retries": tool.max_retries,
            "enabled": "on",
        }
    )
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    tool.refresh_from_db()
    assert tool.display_name == {"es": "Cancelar el pedido"}
    assert tool.labels == {"es": {"order_id": "número de pedido"}}

    data["labels"] = json.dumps({"es": ["número de pedido"]})
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "labels.es: must be an object" in str(response.context["adminform"].form.errors)
    tool.refresh_from_db()
    assert tool.labels == {"es": {"order_id": "número de pedido"}}
