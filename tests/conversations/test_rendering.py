"""The one renderer of replies (apps/conversations/rendering.py): the safe Markdown subset the
widget and the console show, and what must never come out of it — whatever a model or a person
wrote."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from apps.conversations.rendering import (
    ALLOWED,
    LINK_REL,
    message_html,
    message_sources,
    reply_html,
)

# What a model (steered by a customer's words) or a person may write to get script into a
# page; each must come out as text, never as an element, an attribute or a link.
XSS = [
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "<script>alert(1)</script>",
    "**<b>x</b>**",
    "[x](JaVaScRiPt:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](java&#x09;script:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox(1))",
    "<javascript:alert(1)>",
    "![x](https://evil.example/pixel.png)",
    '[x](https://ok.example/" onmouseover="alert(1))',
    'https://ok.example/"><script>alert(1)</script>',
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=https://evil.example></iframe>",
    "<svg onload=alert(1)>",
    "```\n<script>alert(1)</script>\n```",
    "> <img src=x onerror=alert(1)>",
    '<div style="background:url(javascript:alert(1))">x</div>',
]


class Elements(HTMLParser):
    """Every element and attribute in an HTML fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(html)
    parser.close()
    return parser.found


def assert_only_allowed(html: str) -> None:
    for tag, attrs in elements(html):
        assert tag in ALLOWED, (tag, html)
        assert set(attrs) <= ALLOWED[tag], (tag, attrs, html)
        if tag == "a":
            assert (attrs["href"] or "").startswith(("https://", "http://", "mailto:")), html
            assert attrs["target"] == "_blank" and attrs["rel"] == LINK_REL, html


def test_bold_italics_lists_and_links():
    html = str(
        reply_html(
            "Your **refund** is *on its way*:\n\n"
            "- pack the item\n- print the label\n\n"
            "1. drop it off\n2. wait 5 days\n\n"
            "See [our returns page](https://shop.example/returns) or write to <help@shop.example>."
        )
    )
    assert "<strong>refund</strong>" in html and "<em>on its way</em>" in html
    assert "<ul>\n<li>pack the item</li>\n<li>print the label</li>\n</ul>" in html
    assert "<ol>\n<li>drop it off</li>\n<li>wait 5 days</li>\n</ol>" in html
    assert (
        '<a href="https://shop.example/returns" target="_blank" '
        'rel="noopener noreferrer nofollow">our returns page</a>'
    ) in html
    assert '<a href="mailto:help@shop.example"' in html
    assert_only_allowed(html)


def test_line_breaks_bare_addresses_headings_and_code():
    html = str(
        reply_html("## Tracking\nLine one\nline two: https://shop.example/track. `TH-10042`")
    )
    assert html.startswith("<p><strong>Tracking</strong></p>")  # a heading: a bold line
    assert "Line one<br>\nline two" in html
    # the full stop ends the sentence, not the address
    assert '<a href="https://shop.example/track" target="_blank"' in html
    assert ">https://shop.example/track</a>." in html
    assert "<code>TH-10042</code>" in html
    assert_only_allowed(html)


def test_a_numbered_list_keeps_its_start():
    html = str(reply_html("3. three\n4. four"))
    assert html.startswith('<ol start="3">')
    assert_only_allowed(html)


@pytest.mark.parametrize("payload", XSS)
def test_script_never_comes_out(payload):
    html = str(reply_html(f"Hello **there** {payload} bye"))
    assert_only_allowed(html)
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered and "<iframe" not in lowered
    assert "<svg" not in lowered and "<b>" not in lowered and "<div" not in lowered
    assert 'href="javascript' not in lowered and 'href="data' not in lowered
    assert "<strong>there</strong>" in html  # the rest is still rendered


def test_html_in_the_text_shows_as_text():
    assert str(reply_html("**<b>x</b>**")) == "<p><strong>&lt;b&gt;x&lt;/b&gt;</strong></p>"
    assert str(reply_html("<script>alert(1)</script>")) == (
        "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"
    )
    # a link the renderer refuses stays the text that was written
    assert str(reply_html("[x](javascript:alert(1))")) == "<p>[x](javascript:alert(1))</p>"
    # an image is no feature: at most a link to the address, never an <img>
    assert "<img" not in str(reply_html("![a](https://x.example/a.png)"))


def test_only_the_assistants_and_the_staffs_replies_are_markdown():
    assert message_html("assistant", "**hi**") == "<p><strong>hi</strong></p>"
    assert message_html("staff", "*hi*") == "<p><em>hi</em></p>"
    # a customer's words and a system notice are shown as the text they are
    assert message_html("user", "**hi** <img src=x onerror=alert(1)>") == ""
    assert message_html("system", "**hi**") == ""
    assert message_html("assistant", "  ") == ""


def test_every_script_and_language_passes_through_as_text():
    for text in ["**שלום** עולם", "**مرحبا** بالعالم", "¿**Dónde** está?", "**注文** 12345"]:
        html = str(reply_html(text))
        assert "<strong>" in html and html.count("<") == 4, html


def test_message_sources_keep_titles_and_only_web_addresses():
    data = {
        "sources": [
            {"title": "Returns", "url": "https://shop.example/returns"},
            {"title": "FAQ", "url": ""},
            {"title": "Bad", "url": "javascript:alert(1)"},
            {"title": "", "url": "https://shop.example/x"},
            "junk",
            {"url": "https://shop.example/y"},
        ]
    }
    assert message_sources(data) == [
        {"title": "Returns", "url": "https://shop.example/returns"},
        {"title": "FAQ", "url": ""},
        {"title": "Bad", "url": ""},
    ]
    assert message_sources({}) == [] and message_sources(None) == []
    assert message_sources({"sources": "x"}) == []
