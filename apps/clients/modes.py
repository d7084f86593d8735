"""The registry of reasoning modes: what a plan may choose (`Plan.ai_mode`) and bill per mode
(`Plan.multipliers`).

A mode is declared once, in its own module under `apps/reasoning/modes/`, as `MODE = Mode(...)`;
`apps.reasoning.modes` imports those modules when Django starts (`ReasoningConfig.ready`) and
registers each one here. The registry lives in `apps.clients` because plans — a lower layer than
the pipeline — choose and bill modes: the choices of `Plan.ai_mode`, the multipliers' validation
and defaults, the tenant import, the admin, the playground's mode list and the docs table all
read it. Only the pipeline calls `Mode.run`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from apps.core.numbers import finite_decimal
from apps.core.registry import Registry

__all__ = [
    "Deliberation",
    "Mode",
    "ModeDefinitionError",
    "ModeHelp",
    "TokenReserve",
    "UnknownMode",
    "default_multipliers",
    "discover",
    "find",
    "get",
    "mode_choices",
    "modes",
    "multiplier_errors",
    "names",
    "register",
    "unregister",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,19}$")  # fits Plan.ai_mode / UsageRecord.mode
MULTIPLIER_PLACES = Decimal("0.001")
MULTIPLIER_MAX = Decimal("999.999")  # what the former DecimalField(6, 3) columns held
_COLOR = re.compile(r"^#[0-9a-f]{6}$")


class ModeDefinitionError(TypeError):
    """A mode is missing a part or declares one wrongly (raised when its module is imported)."""


class UnknownMode(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no reasoning mode named {name!r} is registered (apps/reasoning/modes/)")
        self.name = name


class Deliberation(StrEnum):
    """Whether a mode's turns run the deliberative loop (and so are capped per hour and reserve
    like deliberative turns: `apps.billing.services.visitors`)."""

    NEVER = "never"
    ALWAYS = "always"
    # Only some turns deliberate: those whose trace records why (`deliberation_trigger`).
    WHEN_NEEDED = "when_needed"


class TokenReserve(StrEnum):
    """The setting that says how many tokens a turn of the mode reserves of a budget before it
    has run (`apps.billing.services.budgets.turn_token_estimate`)."""

    TURN = "BILLING_TURN_TOKEN_RESERVE"
    DELIBERATIVE = "BILLING_DELIBERATIVE_TURN_TOKEN_RESERVE"


@dataclass(frozen=True)
class ModeHelp:
    """The mode's row in the plan admin's AI mode help (HTML, each marked with gettext_noop):
    what happens on each customer message, how many LLM calls, the effect on cost, and a
    `note` after its name ("(recommended)")."""

    happens: str
    llm_calls: str
    cost_effect: str
    note: str = ""


@dataclass(frozen=True)
class Mode:
    """One reasoning mode.

    * `name` is stored on plans, traces and usage records; `label` is what people choose from;
    * `summary` says what it runs and `steps` the LLM steps it may call (the docs table);
    * `default_multiplier` is what a plan bills it at unless the plan says otherwise;
    * `cost_rank` orders modes from the cheapest (a plan's playground may run its own mode and
      the cheaper ones);
    * `message_kinds` are the internal message kinds only this mode writes (the debug legend);
    * `streams`: its draft may be shown while the model writes it (a draft that can go out as
      written: `Turn.may_stream`);
    * `deliberates`: whether its turns run the deliberative loop — whose final answer may then
      be shown as written, and which billing caps and reserves for (`Deliberation`);
    * `token_reserve`: what a turn reserves of the budgets before it has run (`TokenReserve`);
    * `color`: its colour on the usage charts ("#rrggbb");
    * `help`: its row in the plan admin's AI mode help (`ModeHelp`);
    * `run(turn) -> Outcome` is the mode itself (`apps.reasoning.turn`).
    """

    name: str
    label: str
    summary: str
    steps: tuple[str, ...]
    default_multiplier: Decimal
    cost_rank: int
    message_kinds: tuple[str, ...]
    streams: bool
    deliberates: Deliberation
    token_reserve: TokenReserve
    color: str
    help: ModeHelp
    run: Callable[[Any], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ModeDefinitionError(
                f"mode name {self.name!r} must be lower_snake_case, at most 20 characters"
            )
        for part in ("label", "summary"):
            if not (isinstance(getattr(self, part), str) and getattr(self, part).strip()):
                raise ModeDefinitionError(f"mode {self.name!r}: a {part} is required")
        if not (isinstance(self.steps, tuple) and self.steps):
            raise ModeDefinitionError(f"mode {self.name!r}: steps must name the steps it runs")
        if not isinstance(self.default_multiplier, Decimal) or multiplier_problem(
            self.default_multiplier
        ):
            raise ModeDefinitionError(
                f"mode {self.name!r}: default_multiplier must be a Decimal from 0 to "
                f"{MULTIPLIER_MAX} with at most 3 decimal places"
            )
        if not isinstance(self.cost_rank, int):
            raise ModeDefinitionError(f"mode {self.name!r}: cost_rank must be an integer")
        if not isinstance(self.message_kinds, tuple):
            raise ModeDefinitionError(f"mode {self.name!r}: message_kinds must be a tuple")
        self._check_declarations()
        if not callable(self.run):
            raise ModeDefinitionError(f"mode {self.name!r}: run must be callable")

    def _check_declarations(self) -> None:
        """What the mode says it does, which billing, streaming, the admin and the charts
        read."""
        if not isinstance(self.streams, bool):
            raise ModeDefinitionError(f"mode {self.name!r}: streams must be True or False")
        if not isinstance(self.deliberates, Deliberation):
            raise ModeDefinitionError(f"mode {self.name!r}: deliberates must be a Deliberation")
        if not isinstance(self.token_reserve, TokenReserve):
            raise ModeDefinitionError(f"mode {self.name!r}: token_reserve must be a TokenReserve")
        if not (isinstance(self.color, str) and _COLOR.match(self.color)):
            raise ModeDefinitionError(f"mode {self.name!r}: color must be '#rrggbb' (lower case)")
        parts = ("happens", "llm_calls", "cost_effect")
        if not isinstance(self.help, ModeHelp) or not all(
            isinstance(getattr(self.help, part), str) and getattr(self.help, part).strip()
            for part in parts
        ):
            raise ModeDefinitionError(
                f"mode {self.name!r}: help must be a ModeHelp with every part written"
            )

    @property
    def may_deliberate(self) -> bool:
        return self.deliberates is not Deliberation.NEVER

    def may_stream(self, *, deliberating: bool) -> bool:
        """Whether a reply of this mode may be shown as written: its draft when `streams`; in
        its deliberation (`deliberating`), the call that writes the final answer."""
        return self.may_deliberate if deliberating else self.streams


_registry: Registry[Mode] = Registry(
    error=ModeDefinitionError,
    duplicate="two modes are named {name}",
    kind=Mode,
    unknown=UnknownMode,
)


def register(mode: Mode) -> Mode:
    return _registry.register(getattr(mode, "name", ""), mode)


def unregister(name: str) -> None:
    """Remove a mode (for tests that register one of their own)."""
    _registry.unregister(name)


def modes() -> list[Mode]:
    """Every registered mode, from the cheapest to the dearest."""
    return sorted(_registry.values(), key=lambda m: (m.cost_rank, m.name))


def names() -> list[str]:
    return [m.name for m in modes()]


def get(name: str) -> Mode:
    return _registry.require(name)


def find(name: str) -> Mode | None:
    """The mode named `name`, or None (a usage record's "simulation", a mode since removed)."""
    return _registry.get(name)


def discover(package: str) -> list[Mode]:
    """Import every non-underscore module of `package` (`apps.reasoning.modes` at start-up) and
    register its `MODE`."""
    return _registry.discover(package, "MODE", register)


def mode_choices() -> list[tuple[str, str | Promise]]:
    """The choices of `Plan.ai_mode` (a callable, so a new mode module is picked up), in the
    page's language (each mode marks its label with gettext_noop)."""
    return [(m.name, gettext_lazy(m.label)) for m in modes()]


def default_multipliers() -> dict[str, Decimal]:
    return {m.name: m.default_multiplier for m in modes()}


def multiplier_problem(value: Any) -> str:
    """What is wrong with one multiplier ('' when it is fine)."""
    number = finite_decimal(value)
    if number is None:
        return "must be a decimal number, e.g. 1.5"
    if number < 0:
        return "must be 0 or more"
    if number > MULTIPLIER_MAX:
        return f"must be at most {MULTIPLIER_MAX}"
    if number != number.quantize(MULTIPLIER_PLACES):
        return "must have at most 3 decimal places"
    return ""


def multiplier_errors(value: Any) -> dict[str, str]:
    """Problems with a plan's multipliers (mode name → decimal string), by mode; '' is the key
    of a problem with the whole value. Unknown modes are refused; missing ones are allowed
    (they bill at the mode's default)."""
    if not isinstance(value, dict):
        return {"": "must be an object: mode name → decimal string"}
    errors: dict[str, str] = {}
    for name, multiplier in value.items():
        if name not in _registry:
            errors[str(name)] = f"unknown mode (known: {', '.join(names())})"
        elif not isinstance(multiplier, str):
            errors[name] = 'must be a decimal string, e.g. "1.5"'
        elif problem := multiplier_problem(multiplier):
            errors[name] = problem
    return errors


def multiplier_text(value: Decimal | str | int) -> str:
    """How a multiplier is stored: a decimal string with 3 places ("1.500")."""
    return format(Decimal(str(value)).quantize(MULTIPLIER_PLACES), "f")
