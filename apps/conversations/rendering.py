"""How the text of a reply is shown to people: one renderer for the widget and the staff console
(docs/widget.md, "How replies are shown").

The assistant's and the staff's replies are Markdown as models and people write it; a safe
subset becomes HTML here, server-side, with markdown-it-py:

- **bold**, *italics*, `code`, line breaks;
- bulleted and numbered lists; a heading is shown as a bold paragraph;
- links — `[title](https://…)`, `<https://…>` and bare `https://…` addresses — only to
  `http:`, `https:` and `mailto:` addresses, opened in a new tab with
  `rel="noopener noreferrer nofollow"`. Any other address (`javascript:`, `data:`, a relative
  one) stays text.

Raw HTML is never HTML (markdown-it's `html` option is off: `<script>` shows as text) and
images are not a feature (`![x](…)` is at most a link). The output uses only the tags and
attributes in `ALLOWED` — the widget and the console copy nothing else into their page
(static/widget/frame.js and static/console/console.js rebuild it element by element with DOM
APIs), so a renderer bug cannot become script there either.

Customers' own messages and system notices are not Markdown: they are shown as the text they
are (`message_html` gives "" for them)."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

__all__ = [
    "ALLOWED",
    "LINK_SCHEMES",
    "RENDERED_ROLES",
    "message_html",
    "message_sources",
    "reply_html",
]

# The tags the renderer writes, each with the attributes it may carry.
ALLOWED: dict[str, frozenset[str]] = {
    "p": frozenset(),
    "br": frozenset(),
    "strong": frozenset(),
    "em": frozenset(),
    "code": frozenset(),
    "ul": frozenset(),
    "ol": frozenset({"start"}),
    "li": frozenset(),
    "a": frozenset({"href", "target", "rel"}),
}
LINK_SCHEMES = ("http:", "https:", "mailto:")
LINK_REL = "noopener noreferrer nofollow"
# The roles whose messages are Markdown: what the assistant and the staff write.
RENDERED_ROLES = frozenset({"assistant", "staff"})
MAX_CHARS = 20_000  # a message is at most a few thousand characters; never render more

# A bare address in running text; a trailing full stop, comma, bracket… ends the sentence, not
# the address.
_BARE_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}»”’"


def _allowed_link(url: str) -> bool:
    return url.strip().lower().startswith(LINK_SCHEMES)


def _link_open(
    renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    token.attrSet("target", "_blank")
    token.attrSet("rel", LINK_REL)
    return str(renderer.renderToken(tokens, idx, options, env))


def _heading_open(
    renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "<p><strong>"


def _heading_close(
    renderer: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return "</strong></p>\n"


def _bare_links(state: StateCore) -> None:
    """Bare `https://…` addresses in text become links (markdown-it's own linkify needs a
    package this project does not ship)."""
    md = state.md
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        depth = 0
        for token in block.children:
            if token.type == "link_open":
                depth += 1
            elif token.type == "link_close":
                depth -= 1
            if token.type != "text" or depth > 0 or "://" not in token.content:
                children.append(token)
                continue
            children.extend(_split_links(md, token))
        block.children = children


def _split_links(md: MarkdownIt, token: Token) -> list[Token]:
    text, out, position = token.content, [], 0
    for match in _BARE_URL.finditer(text):
        url = match.group(0).rstrip(_TRAILING)
        href = md.normalizeLink(url)
        if not md.validateLink(href):
            continue
        start, end = match.start(), match.start() + len(url)
        if start > position:
            out.append(_text(text[position:start], token.level))
        link_open = Token("link_open", "a", 1, attrs={"href": href}, markup="linkify")
        link_open.info = "auto"
        out.extend(
            [
                link_open,
                _text(md.normalizeLinkText(url), token.level + 1),
                Token("link_close", "a", -1, markup="linkify", info="auto"),
            ]
        )
        position = end
    if not out:
        return [token]
    if position < len(text):
        out.append(_text(text[position:], token.level))
    return out


def _text(content: str, level: int) -> Token:
    token = Token("text", "", 0, content=content)
    token.level = level
    return token


@functools.cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("zero", {"html": False, "breaks": True, "linkify": False})
    md.enable(["emphasis", "list", "link", "autolink", "escape", "newline", "backticks", "heading"])
    md.validateLink = _allowed_link  # type: ignore[method-assign]
    md.core.ruler.push("bare_links", _bare_links)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("heading_open", _heading_open)
    md.add_render_rule("heading_close", _heading_close)
    return md


@functools.lru_cache(maxsize=512)  # the event streams render the same reply for each viewer
def _render(text: str) -> str:
    return _markdown().render(text[:MAX_CHARS]).strip()


def reply_html(text: str) -> SafeString:
    """A reply's Markdown as safe HTML (the subset above; "" for no text)."""
    if not text or not text.strip():
        return mark_safe("")
    return mark_safe(_render(text))  # noqa: S308 - html off, links checked: module docstring


def message_html(role: str, text: str) -> str:
    """What the widget and the console show for a message as HTML: the rendered Markdown of an
    assistant's or staff reply; "" for any other message (shown as plain text)."""
    return str(reply_html(text)) if role in RENDERED_ROLES else ""


def message_sources(data: dict[str, Any] | None) -> list[dict[str, str]]:
    """The help-centre articles a knowledge answer came from (`data.sources`, written by the
    turn: `apps.reasoning.knowledge.answer_sources`) as a page shows them: a title each, and
    its page's address only when that is an http(s) one."""
    raw = (data or {}).get("sources")
    if not isinstance(raw, list):
        return []
    out: list[dict[str, str]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("title"), str):
            continue
        title = item["title"].strip()
        raw_url = item.get("url")
        url = raw_url.strip() if isinstance(raw_url, str) else ""
        if title:
            http = url.lower().startswith(("https://", "http://"))
            out.append({"title": title, "url": url if http else ""})
    return out
