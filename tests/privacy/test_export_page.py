"""The readable export is for the customer: in the language of their conversation, right to
left where that language is, with the same content as the JSON file."""

from __future__ import annotations

import pytest

from apps.privacy.services import subject_export_html

DOCUMENT = {
    "format": "guidedesk.subject-export/1",
    "business": "Trail Shop",
    "generated_at": "2026-11-27T12:00:00+00:00",
    "conversations": [
        {
            "id": "3f0c2a9e-0000-4000-8000-000000000001",
            "created_at": "2026-11-20T10:00:00+00:00",
            "last_message_at": None,
            "status": "closed",
            "language": "es",
            "visitor_id": "",
            "contact_email": "ana@example.com",
            "messages": [
                {
                    "seq": 1,
                    "role": "user",
                    "kind": "text",
                    "text": "¿Dónde está mi pedido?",
                    "created_at": "2026-11-20T10:00:00+00:00",
                }
            ],
            "tool_calls": [],
            "escalations": [],
            "emails": [{"kind": "address_confirmation", "to": "ana@example.com", "at": None}],
        }
    ],
}


@pytest.mark.parametrize(
    ("language", "title", "direction"),
    [
        (None, "Sus datos en poder de Trail Shop", "ltr"),
        ("fr", "Vos données détenues par Trail Shop", "ltr"),
        ("he", "הנתונים שלך המוחזקים על ידי Trail Shop", "rtl"),
        ("ar", "بياناتك لدى Trail Shop", "rtl"),
        ("en", "Your data held by Trail Shop", "ltr"),
    ],
)
def test_the_page_speaks_the_customers_language(
    language: str | None, title: str, direction: str
) -> None:
    page = subject_export_html(DOCUMENT, language=language)
    assert f"<title>{title}</title>" in page
    assert f'dir="{direction}"' in page
    assert "¿Dónde está mi pedido?" in page and "ana@example.com" in page
