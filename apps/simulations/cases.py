"""Writing test cases: create, update and delete one; import and export a suite.

Every write goes through `apps.simulations.schema.case_validate`, the one definition of the case
format (docs/simulations.md), so the admin, the REST API, the tenant import and `manage.py
simulate` accept and refuse exactly the same cases. `cases_export` gives back what
`cases_import` takes: exporting and importing again changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils.translation import gettext as _

from apps.conversations.models import Message, Role, Visibility
from apps.core.exceptions import ApplicationError
from apps.flags.models import MessageFlag
from apps.simulations.models import SimCase
from apps.simulations.schema import MAX_HISTORY, MAX_TEXT, case_validate

if TYPE_CHECKING:
    from apps.clients.models import Client

# The case format's keys stored on the model, in the order an export writes them.
CASE_FIELDS = (
    "name",
    "suite",
    "description",
    "tags",
    "history",
    "turns",
    "simulated",
    "expect",
    "criteria",
    "tools",
    "repeat",
    "enabled",
)
_DEFAULTS: dict[str, Any] = {
    "suite": "default",
    "description": "",
    "tags": [],
    "history": [],
    "turns": [],
    "simulated": {},
    "expect": {},
    "criteria": [],
    "tools": {},
    "repeat": 1,
    "enabled": True,
}


def case_to_dict(case: SimCase) -> dict[str, Any]:
    """One case in the import format; keys holding their default value are left out."""
    data: dict[str, Any] = {}
    for field in CASE_FIELDS:
        value = getattr(case, field)
        if field == "name" or value != _DEFAULTS.get(field):
            data[field] = value
    return data


def _values(data: dict[str, Any]) -> dict[str, Any]:
    """The model's values from a normalized case (every key of the format, defaults filled)."""
    return {field: data.get(field, _DEFAULTS.get(field)) for field in CASE_FIELDS}


def _prefixed(exc: ApplicationError, prefix: str) -> ApplicationError:
    """`exc` with its field paths under `prefix` (e.g. `tests[3].`), for a whole file's errors."""
    fields = (exc.extra or {}).get("fields") or {"": exc.message}
    named = {f"{prefix}{path}".rstrip("."): message for path, message in fields.items()}
    lines = "\n".join(f"  {path}: {message}" for path, message in named.items())
    return ApplicationError(
        _("Invalid test cases:") + f"\n{lines}", {"fields": named}, code=exc.code
    )


def _name_taken(*, client: Client, name: str, exclude: int | None = None) -> bool:
    existing = SimCase.objects.for_client(client).filter(name=name)
    if exclude is not None:
        existing = existing.exclude(pk=exclude)
    return existing.exists()


def _refuse_taken(name: str) -> ApplicationError:
    message = _("A case named %(name)s already exists.") % {"name": repr(name)}
    return ApplicationError(message, {"fields": {"name": message}}, code="invalid")


@transaction.atomic
def simcase_create(*, client: Client, data: dict[str, Any]) -> SimCase:
    """A new case from `data` in the case format (validated; the name must be new)."""
    values = _values(case_validate(data))
    if _name_taken(client=client, name=values["name"]):
        raise _refuse_taken(values["name"])
    return SimCase.objects.create(client=client, **values)


@transaction.atomic
def simcase_update(
    *, client: Client, case: SimCase, data: dict[str, Any], partial: bool = False
) -> SimCase:
    """Replace the case with `data` (`partial`: only the keys given change). The whole result is
    validated again, so a partial change cannot leave an invalid case behind."""
    if case.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    merged = {**case_to_dict(case), **data} if partial else dict(data)
    values = _values(case_validate(merged))
    if values["name"] != case.name and _name_taken(
        client=client, name=values["name"], exclude=case.pk
    ):
        raise _refuse_taken(values["name"])
    changed = [field for field, value in values.items() if getattr(case, field) != value]
    for field in changed:
        setattr(case, field, values[field])
    if changed:
        case.save(update_fields=[*changed, "updated_at"])
    return case


def simcase_delete(*, client: Client, case: SimCase) -> None:
    """Delete a case. Its past case runs stay (they keep the case's name)."""
    if case.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    case.delete()


@transaction.atomic
def cases_import(
    *, client: Client, data: list[Any] | dict[str, Any], replace_suite: bool = False
) -> dict[str, int]:
    """Create or update the client's cases from a list of cases (or one case), by name.

    All or nothing: every case is validated first and an error names its place
    (`[2].turns[0].expect.tool_called`). Importing the same cases again changes nothing.
    `replace_suite`: the cases of each imported suite that the data does not name are deleted,
    so the suite becomes exactly the file's. Returns {"created", "updated", "unchanged",
    "deleted"}."""
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ApplicationError(_("Test cases must be a list of cases."), code="invalid")
    normalized: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    for index, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise ApplicationError(
                    _("must be an object"), {"fields": {"": _("must be an object")}}
                )
            normalized.append(_values(case_validate(item)))
        except ApplicationError as exc:
            errors |= (_prefixed(exc, f"[{index}].").extra or {})["fields"]
    names = [case["name"] for case in normalized]
    for name in sorted({n for n in names if names.count(n) > 1}):
        errors[f"[{names.index(name)}].name"] = _("duplicate case name %(name)s") % {
            "name": repr(name)
        }
    if errors:
        lines = "\n".join(f"  {path}: {message}" for path, message in errors.items())
        raise ApplicationError(
            _("Invalid test cases:") + f"\n{lines}", {"fields": errors}, code="invalid"
        )

    counts = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0}
    existing = {case.name: case for case in SimCase.objects.for_client(client)}
    for values in normalized:
        case = existing.get(values["name"])
        if case is None:
            SimCase.objects.create(client=client, **values)
            counts["created"] += 1
            continue
        changed = [field for field, value in values.items() if getattr(case, field) != value]
        for field in changed:
            setattr(case, field, values[field])
        if changed:
            case.save(update_fields=[*changed, "updated_at"])
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
    if replace_suite and normalized:
        suites = {values["suite"] for values in normalized}
        stale = SimCase.objects.for_client(client).filter(suite__in=suites).exclude(name__in=names)
        counts["deleted"] = stale.delete()[1].get(SimCase._meta.label, 0)
    return counts


def cases_export(*, client: Client, suite: str | None = None) -> list[dict[str, Any]]:
    """The client's cases (of one suite, or all) in the import format, by suite and name."""
    cases = SimCase.objects.for_client(client).order_by("suite", "name")
    if suite:
        cases = cases.filter(suite=suite)
    return [case_to_dict(case) for case in cases]


def simcase_get(*, client: Client, public_id: Any) -> SimCase | None:
    """One of the client's cases by its public id (None: not the client's, or no such case)."""
    return SimCase.objects.for_client(client).filter(public_id=public_id).first()


FLAGGED_SUITE = "flagged"


@transaction.atomic
def simcase_from_flag(*, client: Client, flag: MessageFlag) -> SimCase:
    """A test case from a flagged answer: the conversation's visible history up to the
    customer's message the flagged reply answered, that message as the one turn, and — when
    staff wrote a correction — a judged criterion that the reply agrees with it, plus one that
    it does not repeat the flagged answer. Saved again, the same flag gives the same case
    (updated, not duplicated)."""
    if flag.client_id != client.pk:
        raise ApplicationError(_("Not found."), status=404, code="not_found")
    earlier = list(
        Message.objects.for_client(client)
        .filter(
            conversation_id=flag.conversation_id,
            seq__lt=flag.message.seq,
            visibility=Visibility.VISIBLE,
            role__in=[Role.USER, Role.ASSISTANT],
        )
        .exclude(text="")
        .order_by("seq")
    )
    last_user = max((i for i, m in enumerate(earlier) if m.role == Role.USER), default=None)
    if last_user is None:
        raise ApplicationError(
            _("The customer wrote nothing before the flagged answer: there is no turn to test."),
            code="invalid",
        )
    history = [{"role": str(m.role), "text": m.text[:MAX_TEXT]} for m in earlier[:last_user]][
        -MAX_HISTORY:
    ]
    reply = " ".join(flag.message.text.split())[:500]
    criteria = [_("The reply does not say again: “%(reply)s”") % {"reply": reply}]
    if flag.correction:
        criteria.insert(
            0, _("The reply agrees with this correction: %(fix)s") % {"fix": flag.correction}
        )
    name = f"flagged-{str(flag.public_id)[:8]}"
    data = {
        "name": name,
        "suite": FLAGGED_SUITE,
        "description": _("Made from an answer staff flagged as %(reason)s.")
        % {"reason": flag.get_reason_display().lower()},
        "tags": ["flagged", str(flag.reason)],
        "history": history,
        "turns": [{"customer": earlier[last_user].text[:MAX_TEXT]}],
        "criteria": [c[:MAX_TEXT] for c in criteria],
    }
    existing = SimCase.objects.for_client(client).filter(name=name).first()
    if existing is not None:
        return simcase_update(client=client, case=existing, data=data)
    return simcase_create(client=client, data=data)
