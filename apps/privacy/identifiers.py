"""What identifies the customer an erasure is about, and the sweep that redacts it from every
row of the client that still quotes it (docs/privacy.md "The erasure").

An erasure empties the rows of the customer's own conversations. Copies of their name, address
or order number can outlive them elsewhere: a knowledge article or FAQ written from their
conversation, an insights proposal, a saved simulation case, a note, a playground question, a
reply template. Those rows are shared content, so they are not deleted: every occurrence of an
identifier becomes `[erased]`, and a knowledge article that changed is indexed again (its chunks,
full-text vector and embeddings are rebuilt from the redacted text).

The identifiers are:
- what the conversation rows say: the address left in the chat, the verified customer's id,
  e-mail and name (and each part of the name, matched case-sensitively), the visitor id;
- the personal-data shapes of `apps.notes.redaction` (e-mail addresses, phone, card and IBAN
  numbers, street addresses, order and reference ids — shapes, not words, so in any language)
  found in what the customer wrote and in the parameters and results of tools run for them;
- every string parameter of a tool run for them under a key that names a person or a place
  (`name`, `email`, `phone`, `address`, …);
- what staff add (`identifiers`): a name or an address the customer typed in words no shape
  recognises.

The sweep walks the app registry: every model with a `client` foreign key and a char, text or
JSON field, so a model added later is swept too. It never touches the conversation rows
themselves (blanked by `conversations_erase`) or rows of conversations it was told to leave
alone (an unconfirmed match of the same address: someone else's).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast

from apps.approvals.models import ApprovalRequest
from apps.clients.models import Client
from apps.conversations.models import Conversation, Message, Role
from apps.notes import cache as notes_cache
from apps.notes.redaction import LINK, RULES  # the shapes notes are masked with
from apps.tools.models import PendingAction, ToolExecution

MARKER = "[erased]"
# Shorter identifiers ("Al", "12") match too much; a name part shorter than this is not used
# on its own (the full name still is).
MIN_CHARS = 3
NAME_PART_MIN_CHARS = 4
# Reference-like shapes shorter than this ("1999", "A4") are too common to redact everywhere.
MIN_ID_CHARS = 5
# Parameter keys whose string values identify a person or a place, whatever their shape.
IDENTITY_KEY = re.compile(
    r"(?i)(name|e-?mail|phone|mobile|tel|address|street|postcode|post_code|zip|iban|card)"
)
# Fields never swept: digests, secrets and machine keys (not identifiers, and rewriting them
# would break what they protect).
SKIP_FIELD = re.compile(r"(?i)(_hash$|secret|password|^embedding$|idempotency_key$|^prefix$)")


@dataclass(frozen=True)
class Identifier:
    text: str
    case_sensitive: bool = False

    def pattern(self) -> re.Pattern[str]:
        flags = 0 if self.case_sensitive else re.IGNORECASE
        return re.compile(rf"(?<!\w){re.escape(self.text)}(?!\w)", flags)


def shapes(text: str) -> set[str]:
    """The personal-data shapes in `text` (the notes' masking rules; links excepted)."""
    found: set[str] = set()
    for pattern, replacement in RULES:

        def keep(match: re.Match[str], replacement: Any = replacement) -> str:
            original = match.group(0)
            masked = replacement(match) if callable(replacement) else replacement
            if masked == original:
                return original
            if masked != LINK:
                found.add(original.strip())
            return "\x00"  # taken: later, looser rules must not see it again

        text = pattern.sub(keep, text)
    return {s for s in found if len(s) >= MIN_ID_CHARS or "@" in s}


def _strings(value: Any, key: str = "") -> Iterable[tuple[str, str]]:
    """(key, string) for every string in a JSON value."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)


def subject_identifiers(
    *, client: Client, conversation_ids: list[int], extra: Collection[str] = ()
) -> list[Identifier]:
    """What identifies the customer of `conversation_ids` (module docstring), longest first.
    Read before the conversations are blanked."""
    plain: set[str] = set()
    parts: set[str] = set()
    for email, visitor, customer_id, customer_email, name in (
        Conversation.objects.for_client(client)
        .filter(pk__in=conversation_ids)
        .values_list(
            "contact_email", "visitor_id", "customer_id", "customer_email", "customer_name"
        )
    ):
        plain.update(v for v in (email, visitor, customer_id, customer_email, name) if v)
        if name:
            parts.update(p for p in name.split() if len(p) >= NAME_PART_MIN_CHARS)
    texts = Message.objects.for_client(client).filter(
        conversation_id__in=conversation_ids, role=Role.USER
    )
    for text in texts.values_list("text", flat=True).iterator():
        plain |= shapes(text or "")
    tool_rows: list[Any] = [
        *ToolExecution.objects.for_client(client)
        .filter(conversation_id__in=conversation_ids)
        .values_list("params", "result"),
        *PendingAction.objects.for_client(client)
        .filter(conversation_id__in=conversation_ids)
        .values_list("params", "params"),
        *ApprovalRequest.objects.for_client(client)
        .filter(conversation_id__in=conversation_ids)
        .values_list("params", "params"),
    ]
    for params, result in tool_rows:
        for source in (params, result):
            for key, value in _strings(source):
                value = value.strip()
                if IDENTITY_KEY.search(key) and len(value) >= MIN_CHARS:
                    plain.add(value)
                plain |= shapes(value)
    plain.update(e.strip() for e in extra if e and len(e.strip()) >= MIN_CHARS)
    plain = {p for p in plain if len(p) >= MIN_CHARS}
    found = [Identifier(p) for p in plain] + [
        Identifier(p, case_sensitive=True) for p in parts - plain
    ]
    return sorted(found, key=lambda i: (-len(i.text), i.text))


class Redactor:
    """Replaces every whole-word occurrence of the identifiers with `MARKER` (case-insensitive;
    the name parts case-sensitively). A text is first checked for which identifiers it holds
    at all (a plain substring search), so the pattern applied is small even when the customer
    has hundreds of order numbers."""

    def __init__(self, identifiers: list[Identifier]) -> None:
        self.identifiers = identifiers
        self._lowered = [(i, i.text.lower()) for i in identifiers]

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def _pattern(found: tuple[Identifier, ...], case_sensitive: bool) -> re.Pattern[str]:
        flags = 0 if case_sensitive else re.IGNORECASE
        return re.compile(rf"(?<!\w)(?:{_alternation(found)})(?!\w)", flags)

    def text(self, value: str) -> str:
        lowered = value.lower()
        present = tuple(i for i, low in self._lowered if low in lowered)
        if not present:
            return value
        for case_sensitive in (False, True):
            found = tuple(i for i in present if i.case_sensitive is case_sensitive)
            if found:
                value = self._pattern(found, case_sensitive).sub(MARKER, value)
        return value

    def json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.json(v) for k, v in value.items()}
        return value


def _alternation(identifiers: Iterable[Identifier], *, json_escaped: bool = False) -> str:
    """`a|b|c` of the identifiers (longest first), regex-escaped; with `json_escaped`, also
    each one as JSON stores it with non-ASCII characters escaped (some databases do)."""
    texts: set[str] = set()
    for identifier in identifiers:
        texts.add(identifier.text)
        if json_escaped:
            texts.add(json.dumps(identifier.text)[1:-1])
    return "|".join(re.escape(t) for t in sorted(texts, key=lambda t: (-len(t), t)))


def redact(text: str, identifiers: list[Identifier]) -> str:
    return Redactor(identifiers).text(text)


def swept_fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    """The char, text and JSON fields of `model` the sweep redacts."""
    return [
        f
        for f in model._meta.concrete_fields
        if isinstance(f, (models.CharField, models.TextField, models.JSONField))
        and not (f.choices or f.primary_key or f.unique or SKIP_FIELD.search(f.name))
    ]


def swept_models(skip: Collection[type[models.Model]] = ()) -> list[type[models.Model]]:
    """Every concrete model owned by a client (a `client` foreign key) with a swept field."""
    found = []
    for model in apps.get_models():
        if model._meta.proxy or not model._meta.managed or model in skip:
            continue
        client_field = next(
            (f for f in model._meta.concrete_fields if f.name == "client" and f.is_relation),
            None,
        )
        if (
            client_field is not None
            and client_field.related_model is Client
            and swept_fields(model)
        ):
            found.append(model)
    return found


def identifiers_sweep(
    *,
    client: Client,
    identifiers: list[Identifier],
    skip: Collection[type[models.Model]] = (),
    leave_conversations: Collection[int] = (),
) -> dict[type[models.Model], list[int]]:
    """Redact `identifiers` from every swept row of `client` (module docstring); returns the
    changed row ids per model. Rows of `leave_conversations` are not touched."""
    changed: dict[type[models.Model], list[int]] = {}
    if not identifiers:
        return changed
    redactor = Redactor(identifiers)
    # One case-insensitive regular expression per field finds the candidate rows in the
    # database (JSON read as text); the redactor then rewrites them whole-word in Python.
    plain = f"(?:{_alternation(identifiers)})"
    escaped = f"(?:{_alternation(identifiers, json_escaped=True)})"
    for model in swept_models(skip):
        fields = swept_fields(model)
        rows = model._default_manager.filter(client=client)
        where = Q()
        for f in fields:
            if isinstance(f, models.JSONField):
                rows = rows.annotate(**{f"_swept_{f.name}": Cast(f.name, models.TextField())})
                where |= Q(**{f"_swept_{f.name}__iregex": escaped})
            else:
                where |= Q(**{f"{f.name}__iregex": plain})
        rows = rows.filter(where)
        if leave_conversations and any(
            f.name == "conversation" for f in model._meta.concrete_fields
        ):
            rows = rows.exclude(conversation_id__in=list(leave_conversations))
        for row in rows.values("pk", *[f.attname for f in fields]).iterator():
            updates: dict[str, Any] = {}
            for f in fields:
                value = row[f.attname]
                if value in (None, "", [], {}):
                    continue
                new = redactor.text(value) if isinstance(value, str) else redactor.json(value)
                if new != value:
                    limit = getattr(f, "max_length", None)
                    updates[f.attname] = new[:limit] if isinstance(new, str) and limit else new
            if updates:
                model._default_manager.filter(client=client, pk=row["pk"]).update(**updates)
                changed.setdefault(model, []).append(row["pk"])
    notes_cache.invalidate(client.pk)
    return changed
