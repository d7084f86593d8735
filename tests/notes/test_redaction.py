"""The masker of note text (apps/notes/redaction.py): personal-data shapes in several languages
and scripts are masked; ordinary support knowledge stays readable."""

from __future__ import annotations

import pytest

from apps.notes.redaction import collapse, inert_line, mask_personal_data

# (text, what must disappear)
PERSONAL_DATA = [
    # order, payment and reference ids
    ("my order W1001 please", "W1001"),
    ("Bestellung TH-12345 ist weg", "TH-12345"),
    ("order A1B2C3", "A1B2C3"),
    ("UPS 1Z999AA10123456784", "1Z999AA10123456784"),
    ("payment pi_3NxYz2LkdIy failed", "pi_3NxYz2LkdIy"),
    ("Zahlung PAY-77AB9", "PAY-77AB9"),
    ("Bestellung Nr. 48213", "48213"),
    ("заказ №98765", "98765"),
    ("订单号 20240315 未到", "20240315"),
    ("commande n° 884213", "884213"),
    # e-mail addresses
    ("mail jo.doe+x@mail.example.com now", "jo.doe+x@mail.example.com"),
    ("écrivez à jérôme@exemple.fr", "jérôme@exemple.fr"),
    # phones, international and national formats
    ("call +1 555 010 0199", "555 010 0199"),
    ("ruf an: +49 30 12345678", "12345678"),
    ("tel. 06 12 34 56 78", "06 12 34 56 78"),
    ("(020) 7946 0958", "7946 0958"),
    ("+44 20 7946 0958", "7946 0958"),
    ("+91 98765 43210", "98765 43210"),
    ("電話 090-1234-5678", "090-1234-5678"),
    ("0049 89 1234567", "1234567"),
    # card numbers, IBANs
    ("card 4111 1111 1111 1111", "4111"),
    ("Karte 5500-0000-0000-0004", "5500"),
    ("IBAN DE89 3704 0044 0532 0130 00", "DE89"),
    ("FR1420041010050500013M02606", "FR1420041010050500013M02606"),
    # IP addresses
    ("from 192.168.10.20", "192.168.10.20"),
    ("from 2001:db8:85a3::8a2e:370:7334", "2001:db8"),
    # links and domains
    ("send customers to refunds-zephyr.example/claim", "zephyr"),
    ("visit https://evil.example/x?y=1", "evil"),
    ("see www.shop.de", "shop.de"),
    ("перейдите на пример.рф/оплата", "пример.рф"),
    # street addresses with house numbers
    ("I am Jane Roe, 12 Elm Street Springfield", "12 Elm Street"),
    ("221B Baker Street", "221B Baker"),
    ("Hauptstraße 5, 10115 Berlin", "Hauptstraße 5"),
    ("10 rue de Rivoli, Paris", "10 rue"),
    ("Via Roma 1, Milano", "Roma 1"),
    ("Calle Mayor 5, Madrid", "Mayor 5"),
    ("ul. Marszałkowska 10", "Marszałkowska 10"),
    ("улица Ленина, д. 5", "Ленина"),
    ("Rua Augusta 100", "Augusta 100"),
    ("Drottninggatan 3", "Drottninggatan 3"),
    ("Kalverstraat 12", "Kalverstraat 12"),
    ("東京都千代田区1-2-3", "1-2-3"),
    ("3丁目5番地", "3丁目"),
    ("中山路100号", "中山路100号"),
    ("세종대로 175", "세종대로 175"),
    ("Atatürk Caddesi No: 5", "Caddesi No: 5"),
    ("شارع الملك فهد 12", "فهد 12"),
]

BENIGN = [
    "Refunds take 5-7 business days",
    "Returns within 30 days of delivery",
    "Support is open 24/7",
    "We ship to 3 countries",
    "Use the 2nd address line",
    "mp3 and i18n files are fine",
    "COVID-19 rules apply to returns",
    "e.g. the customer wants a refund",
    "Version 2.0 of the app",
    "Ask for the order number first",
    "send it via the app 2 times",
    "3 items in place of one",
    "It costs 5 EUR, open 10:30 to 17:00",
    "Customs fees apply to EU orders over 150 EUR",
    "Rückgabe innerhalb von 14 Tagen",
    "Le remboursement prend 5 jours",
    "El reembolso tarda 10 días",
    "返品は30日以内",
    "Возврат в течение 14 дней",
    "환불은 7일 이내",
    "A request for information went to tool get_order_status (read): it failed (timed out).",
    "Handed to a person because the customer asked for a human; no tool ran.",
]


@pytest.mark.parametrize(("text", "secret"), PERSONAL_DATA)
def test_personal_data_shapes_are_masked(text, secret):
    masked = mask_personal_data(text)
    assert secret not in masked
    assert "[" in masked  # replaced by a placeholder, not silently dropped


@pytest.mark.parametrize("text", BENIGN)
def test_ordinary_support_knowledge_stays_readable(text):
    assert mask_personal_data(text) == text
    assert inert_line(text) == text


def test_names_are_not_detected_the_approval_gate_keeps_them_out():
    # Documented limit: no rule finds a name in every language.
    assert "Jane Roe" in mask_personal_data("I am Jane Roe")


def test_inert_line_collapses_newlines_and_control_characters_and_cuts():
    text = "a\nb\r\nc\td\u2028e\u2029f\x1b[2Kg\u202eh\u200bi\x0bj"
    assert collapse(text) == "a b c d e f [2Kg h i j"
    assert inert_line("x" * 500, limit=140) == "x" * 139 + "…"
