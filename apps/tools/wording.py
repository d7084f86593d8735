"""How GuideDesk itself words a tool for the customer: its display name, the labels of its
parameters and result fields, the values (numbers and amounts by the language's rules), the
summary of a result when no model writes one, and the sentence for a refusal.

A tool's definition may carry `display_name` ({language: name}) and `labels` ({language:
{field: label}}) (docs/tenant-import.md). A language the definition lacks falls back to its base
language (`pt` for `pt-br`), then to English, then to the name humanised (`cancel_order` →
"Cancel order"); that name is always put inside a translated sentence, never shown alone.

Every function words for the active language (`translation.override` around the turn), or the
`language` given."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from babel import Locale, UnknownLocaleError
from babel.numbers import format_currency, format_decimal
from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext, gettext_lazy, pgettext

__all__ = [
    "ERROR_CODES",
    "action_details",
    "display_name",
    "error_text",
    "field_label",
    "naming_problems",
    "result_text",
    "value_text",
]

# The refusal codes a tool may answer with (`{"ok": false, "error": "…", "code": "…"}` from a
# webhook, `ToolError(…, code=…)` from a builtin): each is told to the customer in their
# language. docs/webhooks.md lists them.
ERROR_CODES = {
    "not_found": gettext_lazy(
        "I couldn't find anything for the details you gave (%(details)s). Could you check them "
        "and try again?"
    ),
    "already_shipped": gettext_lazy("That can't be done any more: the order has already shipped."),
    "already_delivered": gettext_lazy(
        "That can't be done any more: the order has already been delivered."
    ),
    "already_cancelled": gettext_lazy("That can't be done: the order is already cancelled."),
    "not_allowed": gettext_lazy("Sorry, that isn't possible for this request."),
}
ERROR_CODE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_DECIMAL = re.compile(r"^-?\d+\.\d+$")


def _language(language: str | None) -> str:
    return (language or translation.get_language() or settings.LANGUAGE_CODE).lower()


def _candidates(language: str | None) -> list[str]:
    code = _language(language)
    found = [code, code.split("-")[0], "en"]
    return list(dict.fromkeys(found))


def humanised(name: str) -> str:
    words = " ".join(str(name).replace("_", " ").replace("-", " ").split())
    return words[:1].upper() + words[1:]


def display_name(tool: Any, language: str | None = None) -> str:
    """The tool's name as the customer reads it."""
    names = tool.display_name if isinstance(tool.display_name, dict) else {}
    for code in _candidates(language):
        value = names.get(code)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return humanised(tool.name)


def _labelled(tool: Any, key: str, language: str | None) -> str:
    labels = tool.labels if isinstance(tool.labels, dict) else {}
    for code in _candidates(language):
        by_field = labels.get(code)
        value = by_field.get(key) if isinstance(by_field, dict) else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def field_label(tool: Any, field: str, language: str | None = None) -> str:
    """A parameter's (or result field's) label as the customer reads it."""
    return _labelled(tool, field, language) or humanised(field).lower()


def shown_value(
    tool: Any, field: str, value: Any, *, currency: str = "", language: str | None = None
) -> str:
    """A field's value as the customer reads it: a word the tool answers with (a status such as
    `shipped`) in the language's words where `labels` has them under `field=value`
    (`"status=shipped": "enviado"`), else `value_text`."""
    if isinstance(value, str):
        word = _labelled(tool, f"{field}={value}", language)
        if word:
            return word
    return value_text(value, currency=currency, language=language)


def label_and_value(label: str, value: str) -> str:
    """`label: value` by the language's typography (French puts a space before the colon)."""
    return pgettext("a label and its value", "%(label)s: %(value)s") % {
        "label": label,
        "value": value,
    }


def _babel_locale(language: str | None) -> Locale:
    try:
        return Locale.parse(_language(language).replace("-", "_"))
    except (UnknownLocaleError, ValueError):
        return Locale.parse("en")


def value_text(value: Any, *, currency: str = "", language: str | None = None) -> str:
    """A value by the language's rules: decimals with its separators, an amount (a decimal next
    to an ISO `currency`) with its currency sign where the language puts it."""
    locale = _babel_locale(language)
    if isinstance(value, bool):
        return pgettext("a tool's value", "yes") if value else pgettext("a tool's value", "no")
    number: Decimal | None = None
    if isinstance(value, float) or (isinstance(value, str) and _DECIMAL.match(value.strip())):
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = None
    elif isinstance(value, Decimal):
        number = value
    if number is not None:
        if currency:
            return str(format_currency(number, currency, locale=locale))
        return str(format_decimal(number, locale=locale))
    if isinstance(value, list):
        return ", ".join(value_text(v, currency=currency, language=language) for v in value)
    if isinstance(value, dict):
        return ", ".join(
            f"{humanised(k).lower()}: {value_text(v, currency=currency, language=language)}"
            for k, v in value.items()
        )
    return str(value)


def _currency(*sources: Any) -> str:
    for source in sources:
        if isinstance(source, dict):
            code = source.get("currency")
            if isinstance(code, str) and re.fullmatch(r"[A-Z]{3}", code):
                return code
    return ""


def _pairs(
    tool: Any,
    values: dict[str, Any],
    *,
    currency: str,
    language: str | None,
    skip: set[str],
    separator: str = ", ",
) -> str:
    return separator.join(
        label_and_value(
            field_label(tool, key, language),
            shown_value(tool, key, v, currency=currency, language=language),
        )
        for key, v in values.items()
        if key not in skip and v is not None and v != "" and v != [] and v != {}
    )


def shown_values(
    tool: Any, result: Any, params: dict[str, Any] | None = None, language: str | None = None
) -> dict[str, str]:
    """Every field of a result as the customer reads its value (`shown_value`): what the
    offline demo model writes into its sentences."""
    if not isinstance(result, dict):
        return {}
    currency = _currency(result, params)
    return {
        str(key): shown_value(tool, str(key), value, currency=currency, language=language)
        for key, value in result.items()
    }


def action_details(tool: Any, params: dict[str, Any], language: str | None = None) -> str:
    """The parameters of a call as the customer confirms them: "order number: TH-12345"."""
    ordered = dict(sorted(params.items()))
    return _pairs(tool, ordered, currency=_currency(params), language=language, skip=set())


def result_text(tool: Any, params: dict[str, Any], result: Any, language: str | None = None) -> str:
    """A successful run told in a sentence when no model writes the reply (the model is offline
    or failed, or a teammate approved the call): the tool's display name and, after it, what
    its result says, labelled and formatted for the language."""
    action = display_name(tool, language)
    if not isinstance(result, dict):
        result = {}
    # Repeating what the customer asked for (the order number) adds nothing; the currency is
    # shown with the amounts.
    skip = {k for k, v in result.items() if params.get(k) == v} | {"currency"}
    details = _pairs(
        tool,
        result,
        currency=_currency(result, params),
        language=language,
        skip=skip,
        separator="; ",
    )
    if details:
        return gettext("Done: I've completed “%(action)s” for you. The details: %(details)s.") % {
            "action": action,
            "details": details,
        }
    return gettext("Done: I've completed “%(action)s” for you.") % {"action": action}


def error_text(
    tool: Any,
    params: dict[str, Any],
    *,
    error: str,
    code: str = "",
    business_language: str = "",
    language: str | None = None,
) -> str:
    """A refusal told to the customer. A known code has its own sentence; otherwise the
    business's own words are shown only to a customer writing in the business's language (the
    language its texts are written in), and everyone else is told in a sentence of their own
    language."""
    known = ERROR_CODES.get(code)
    if known is not None:
        return str(known) % {"details": action_details(tool, params, language) or "—"}
    same = (
        business_language
        and _language(business_language).split("-")[0] == (_language(language).split("-")[0])
    )
    if same and error.strip():
        return gettext("Sorry, I couldn't complete that: %(error)s") % {"error": error.strip()}
    return gettext(
        "Sorry, I couldn't complete “%(action)s”: it isn't possible for this request. If you "
        "have questions about it, our team can help."
    ) % {"action": display_name(tool, language)}


MAX_NAME_CHARS = 100
_LANGUAGE_KEY = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8})?$")


def naming_problems(display_name: Any, labels: Any) -> list[str]:
    """What is wrong with a tool's `display_name` and `labels` ([] = they are valid): both
    are keyed by language code (`en`, `es`, `pt-br`); `labels` maps each language to
    {field: label}. The messages name the key (the importer and the admin show them)."""
    problems: list[str] = []
    if not isinstance(display_name, dict):
        problems.append('display_name: must be an object by language, e.g. {"en": "Cancel order"}')
    else:
        for code, name in display_name.items():
            if not _LANGUAGE_KEY.match(str(code)):
                problems.append(f"display_name: {code!r} is not a language code")
            elif not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
                problems.append(
                    f"display_name.{code}: must be a text of 1 to {MAX_NAME_CHARS} characters"
                )
    if not isinstance(labels, dict):
        problems.append('labels: must be an object by language, e.g. {"en": {"order_id": "…"}}')
        return problems
    for code, by_field in labels.items():
        if not _LANGUAGE_KEY.match(str(code)):
            problems.append(f"labels: {code!r} is not a language code")
        elif not isinstance(by_field, dict):
            problems.append(f'labels.{code}: must be an object, e.g. {{"order_id": "…"}}')
        else:
            for field, label in by_field.items():
                if not isinstance(label, str) or not label.strip() or len(label) > MAX_NAME_CHARS:
                    problems.append(
                        f"labels.{code}.{field}: must be a text of 1 to {MAX_NAME_CHARS} characters"
                    )
    return problems
