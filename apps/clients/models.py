from __future__ import annotations

import secrets
from decimal import Decimal
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from pydantic import ValidationError as PydanticValidationError

from apps.clients import modes
from apps.clients.business_hours import business_hours_errors
from apps.clients.business_info import business_info_errors
from apps.clients.deliberation import (
    DELIBERATION_ROWS,
    default_deliberation,
    deliberation_errors,
    deliberation_settings,
    settings_errors,
)
from apps.clients.rowcache import RowCacheQuerySet
from apps.core.model_bases import optional_fk
from apps.core.models import TenantOwnedModel, TimeStampedModel


class AIMode(StrEnum):
    """The names of the modes GuideDesk ships, for code that treats one of them specially
    (billing's per-visitor limits, benchmarks). What modes exist, their labels and default
    multipliers is the registry's (`apps.clients.modes`, filled from `apps/reasoning/modes/`)."""

    STANDARD = "standard"
    ADAPTIVE = "adaptive"
    DELIBERATIVE = "deliberative"
    AS_NEEDED = "as_needed"


def validate_multipliers(value: Any) -> None:
    errors = modes.multiplier_errors(value)
    if errors:
        raise ValidationError(
            "; ".join(f"{name}: {message}" if name else message for name, message in errors.items())
        )


# Per-visitor limits' defaults (docs/billing.md): a conversation and a visitor's day each get
# about one deliberative answer (~85k tokens) plus a dozen adaptive ones; a deliberative
# answer runs only when its whole reservation still fits in both.
DEFAULT_CONVERSATION_TOKEN_BUDGET = 150_000
DEFAULT_VISITOR_DAILY_TOKEN_BUDGET = 150_000
DEFAULT_DELIBERATIVE_TURNS_PER_HOUR = 3
# Simulations' own monthly token budget (docs/simulations.md "Budget"): apart from the live one.
DEFAULT_SIMULATION_MONTHLY_TOKENS = 2_000_000
RUBRIC_KEY_MAX = 40


def rubric_principle_errors(principles: Any) -> list[str]:
    """What is wrong with a rubric's principles: a non-empty list of {key, label, definition},
    keys lower_snake_case/camelCase identifiers and unique."""
    if not isinstance(principles, list) or not principles:
        return [gettext("Give at least one principle: a list of {key, label, definition}.")]
    problems: list[str] = []
    seen: set[str] = set()
    for n, principle in enumerate(principles, start=1):
        if not isinstance(principle, dict):
            problems.append(
                gettext("Principle %(n)s must be an object with key, label and definition.")
                % {"n": n}
            )
            continue
        key = principle.get("key")
        if not isinstance(key, str) or not key.isidentifier() or len(key) > RUBRIC_KEY_MAX:
            problems.append(
                gettext(
                    "Principle %(n)s: key must be an identifier such as 'grounded' "
                    "(letters, digits, _; at most %(max)s characters)."
                )
                % {"n": n, "max": RUBRIC_KEY_MAX}
            )
        elif key in seen:
            problems.append(
                gettext("Principle %(n)s: the key %(key)s is used twice.")
                % {"n": n, "key": repr(key)}
            )
        else:
            seen.add(key)
        for part in ("label", "definition"):
            value = principle.get(part)
            if not isinstance(value, str) or not value.strip():
                problems.append(
                    gettext("Principle %(n)s: %(part)s must be a non-empty text.")
                    % {"n": n, "part": part}
                )
    return problems


class Rubric(TimeStampedModel):
    """What deliberative mode's reasoning steps score themselves against: principles (each a
    key, label and definition — the definitions are re-injected into every feedback call) and
    the loop's thresholds. Platform data, chosen per plan (and optionally per client); two ship
    with GuideDesk: `support` (the default) and `contemplative` (apps/clients/rubrics.py)."""

    slug = models.SlugField(max_length=50, unique=True, verbose_name=_("slug"))
    name = models.CharField(max_length=100, verbose_name=_("name"))
    description = models.TextField(blank=True, verbose_name=_("description"))
    principles = models.JSONField(
        default=list,
        help_text=_(
            'A JSON list of {"key", "label", "definition"}; each reasoning step scores '
            "itself 0–1 on every key."
        ),
        verbose_name=_("principles"),
    )
    min_steps = models.PositiveSmallIntegerField(
        default=4,
        help_text=_("The loop always runs at least this many reasoning steps (1–20)."),
        verbose_name=_("min steps"),
    )
    max_steps = models.PositiveSmallIntegerField(
        default=10,
        help_text=_("The loop never runs more than this many steps (MIN–20)."),
        verbose_name=_("max steps"),
    )
    target = models.DecimalField(
        max_digits=4,
        decimal_places=3,
        default=Decimal("0.75"),
        help_text=_(
            "After the minimum, the loop stops as soon as the mean self-score reaches "
            "this (0 < target ≤ 1)."
        ),
        verbose_name=_("target"),
    )

    class Meta:
        verbose_name = _("rubric")
        verbose_name_plural = _("rubrics")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        problems = rubric_principle_errors(self.principles)
        if problems:
            errors["principles"] = problems
        errors.update(
            deliberation_errors(
                min_steps=self.min_steps, max_steps=self.max_steps, target=self.target
            )
        )
        if errors:
            raise ValidationError(errors)


class Plan(TimeStampedModel):
    """What a client pays for: the reasoning mode its assistant runs in and the billing terms."""

    objects = RowCacheQuerySet.as_manager()

    slug = models.SlugField(max_length=50, unique=True, verbose_name=_("slug"))
    name = models.CharField(max_length=100, verbose_name=_("name"))
    ai_mode = models.CharField(
        max_length=20,
        choices=modes.mode_choices,
        default=AIMode.STANDARD.value,
        verbose_name=_("ai mode"),
    )
    multipliers = models.JSONField(
        _("billing multipliers"),
        default=dict,
        blank=True,
        validators=[validate_multipliers],
        help_text=_(
            "Mode name → decimal string: billed = provider cost × the multiplier of the "
            "mode that ran. A mode not listed bills at its default."
        ),
    )
    post_draft_hooks = models.JSONField(
        default=list,
        blank=True,
        help_text=_(
            "Extra checks that run, in this order, after the assistant has written a reply and "
            "before the customer sees it; empty = none."
        ),
        verbose_name=_("post draft hooks"),
    )
    # The evaluation layer (apps/reasoning/evaluation.py).
    evaluation_enabled = models.BooleanField(
        _("second-opinion evaluation"),
        default=False,
        help_text=_(
            "After a knowledge answer (no tool, or a read-only tool), a second LLM call "
            "checks the draft against the source text it used, and may correct it, raise or lower "
            "its confidence, or hand a questioned answer to a person. One extra call per evaluated "
            "answer, billed as step `evaluate`. Off by default: turning it on raises cost."
        ),
    )
    evaluation_min_chars = models.PositiveIntegerField(
        _("evaluate drafts longer than (characters)"),
        default=100,
        help_text=_("Short replies (greetings, one-liners) are not checked. Default: 100."),
    )
    evaluation_min_confidence = models.PositiveSmallIntegerField(
        _("evaluate from confidence (%)"),
        default=30,
        validators=[MaxValueValidator(100)],
        help_text=_(
            "Only replies the assistant is at least this sure of are checked (its own 1–10 "
            "rating × 10; the standard mode gives none and counts as 70 %). Default: 30."
        ),
    )
    evaluation_escalate_below = models.PositiveSmallIntegerField(
        _("hand questioned answers to a person below (%)"),
        default=50,
        validators=[MaxValueValidator(100)],
        help_text=_(
            "A questioned answer (confidence − 30 %) whose confidence falls below this goes "
            "to a person instead of the customer; 0 = never."
        ),
    )
    monthly_fee = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        default=Decimal("0"),
        validators=[MinValueValidator(0)],
        verbose_name=_("monthly fee"),
    )
    included_turns = models.PositiveIntegerField(default=0, verbose_name=_("included turns"))
    monthly_token_budget = models.PositiveBigIntegerField(
        default=0,
        help_text=_("Hard monthly LLM token limit for each client on this plan; 0 = none."),
        verbose_name=_("monthly token budget"),
    )
    monthly_turn_budget = models.PositiveIntegerField(
        default=0,
        help_text=_("Hard monthly limit of customer turns; 0 = none."),
        verbose_name=_("monthly turn budget"),
    )
    per_turn_token_cap = models.PositiveIntegerField(
        default=0,
        help_text=_("Most tokens one customer message may use; 0 = none."),
        verbose_name=_("per turn token cap"),
    )
    simulation_monthly_tokens = models.PositiveBigIntegerField(
        _("simulation tokens per month"),
        default=DEFAULT_SIMULATION_MONTHLY_TOKENS,
        help_text=_(
            "Simulations' own monthly token budget for each client on this plan, apart from the "
            "live budget: a run that would go past it is refused, one that reaches it stops. "
            "0 = no limit."
        ),
    )
    # -- per-visitor limits (docs/billing.md "Per-conversation and per-visitor limits") -------
    # They bound what one anonymous visitor can spend, so that nobody can use up the client's
    # monthly budget (and hand every other customer to staff) on their own.
    conversation_token_budget = models.PositiveIntegerField(
        _("token budget per conversation"),
        default=DEFAULT_CONVERSATION_TOKEN_BUDGET,
        help_text=_(
            "The most tokens the assistant may spend on one conversation. When it is used up, "
            "the conversation is handed to your team (reason: usage limit). 0 = no limit."
        ),
    )
    visitor_daily_token_budget = models.PositiveIntegerField(
        _("token budget per visitor per day"),
        default=DEFAULT_VISITOR_DAILY_TOKEN_BUDGET,
        help_text=_(
            "The most tokens the assistant may spend per day on one visitor (one network "
            "address), across all their conversations. Past it, the visitor's conversations are "
            "handed to your team instead of answered by the assistant. 0 = no limit."
        ),
    )
    deliberative_turns_per_hour = models.PositiveSmallIntegerField(
        _("deliberative answers per conversation per hour"),
        default=DEFAULT_DELIBERATIVE_TURNS_PER_HOUR,
        help_text=_(
            "On a deliberative plan, at most this many messages of one conversation per hour "
            "get the deep (deliberative) treatment; the others are answered in adaptive mode. "
            "0 = no limit."
        ),
    )
    # -- deliberate when needed (apps/reasoning/modes/as_needed.py) --------------------------
    deliberate_below_confidence = models.PositiveSmallIntegerField(
        _("deliberate below confidence"),
        default=7,
        validators=[MinValueValidator(1), MaxValueValidator(11)],
        help_text=_(
            "In “deliberate when needed” mode, an answer the assistant rates below this "
            "(1–10) is thought through in deliberative mode; 11 = always, 1 = never on "
            "confidence alone (a complaint, a critique that would hand over or an evaluation "
            "that questions the answer still deliberate). Default: 7."
        ),
    )
    notes_enabled = models.BooleanField(
        default=True,
        help_text=_(
            "Let the assistant learn across conversations: it reads the relevant notes before "
            "answering and writes notes after conversations. Off: it neither reads nor writes "
            "them."
        ),
        verbose_name=_("notes enabled"),
    )
    notes_retention_days = models.PositiveIntegerField(
        default=90,
        validators=[MinValueValidator(1)],
        help_text=_("Notes older than this many days are removed by the nightly retention task."),
        verbose_name=_("notes retention days"),
    )
    retention_days = models.PositiveIntegerField(
        _("keep conversations for (days)"),
        default=0,
        help_text=_(
            "Conversations with no activity for this many days are erased by the daily "
            "retention task: their messages, reasoning, tool calls and the notes drawn from "
            "them; usage figures stay for billing (docs/privacy.md). 0 = keep them."
        ),
    )
    notes_prompt_budget_tokens = models.PositiveIntegerField(
        default=400,
        help_text=_(
            "Most tokens the notes block may add to a prompt; the oldest notes are dropped "
            "first to fit. 0 = no notes in prompts."
        ),
        verbose_name=_("notes prompt budget tokens"),
    )
    # -- deliberative mode (apps/reasoning/deliberation) -----------------------------------------
    rubric = optional_fk(
        Rubric,
        _("rubric"),
        on_delete=models.PROTECT,
        related_name="plans",
        help_text=_(
            "What deliberative reasoning steps score themselves against; empty = the "
            "'support' rubric. A client may choose its own."
        ),
    )
    # MIN / MAX / TARGET over the rubric's, refinement rounds and early-stop score: one JSON
    # object, read through apps.clients.deliberation.deliberation_settings(plan).
    deliberation = models.JSONField(
        _("Deliberative mode"),
        default=default_deliberation,
        blank=True,
        editable=False,  # the admin's form has one row per setting
    )

    # -- outcomes (apps/outcomes, docs/outcomes.md) ----------------------------------------------
    resolution_window_hours = models.PositiveIntegerField(
        _("resolution window (hours)"),
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 30)],
        help_text=_(
            "A conversation quiet for this long has ended; the assistant resolved it only if "
            "the customer did not come back within this window (or rated it 4 or 5)."
        ),
    )

    class Meta:
        verbose_name = _("plan")
        verbose_name_plural = _("plans")
        ordering = ["monthly_fee", "slug"]

    def __str__(self) -> str:
        return self.name

    @property
    def mode_multipliers(self) -> dict[str, Decimal]:
        """The multiplier of every registered mode: this plan's, else the mode's default."""
        return {
            name: Decimal(str(self.multipliers[name])) if name in self.multipliers else default
            for name, default in modes.default_multipliers().items()
        }

    def clean(self) -> None:
        """The deliberative settings are well formed, and MIN / MAX / TARGET as they will apply
        (this plan's overrides over its rubric's) satisfy 1 ≤ MIN ≤ MAX ≤ 20 and
        0 < TARGET ≤ 1; errors name the admin's row (`DELIBERATION_ROWS`)."""
        try:
            chosen = deliberation_settings(self)
        except PydanticValidationError as exc:
            raise ValidationError(settings_errors(exc)) from None
        overrides = {key: getattr(chosen, key) for key in ("min_steps", "max_steps", "target")}
        if all(value is None for value in overrides.values()):
            return
        rubric = self.rubric if self.rubric_id else None
        inherited: dict[str, Any] = {
            "min_steps": rubric.min_steps if rubric else 4,
            "max_steps": rubric.max_steps if rubric else 10,
            "target": rubric.target if rubric else Decimal("0.75"),
        }
        effective = {
            key: inherited[key] if value is None else value for key, value in overrides.items()
        }
        errors: dict[str, list[str]] = {}
        for key, message in deliberation_errors(**effective).items():
            if overrides[key] is None:  # the rubric's value clashes with an override
                key = next(k for k, value in overrides.items() if value is not None)
                message += gettext(" (the other value comes from the rubric)")
            errors.setdefault(DELIBERATION_ROWS[key], []).append(message)
        if errors:
            raise ValidationError(errors)

    def multiplier_for(self, mode: str) -> Decimal:
        try:
            return self.mode_multipliers[mode]
        except KeyError:
            raise ValueError(f"Unknown AI mode: {mode!r}") from None


def new_widget_key() -> str:
    return "wk_" + secrets.token_urlsafe(18)


def validate_origin(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
        raise ValidationError(
            gettext(
                "%(value)s is not an origin (expected scheme://host[:port], e.g. "
                "https://shop.example)."
            )
            % {"value": repr(value)}
        )
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValidationError(gettext("%(value)s is not an origin.") % {"value": repr(value)})


def normalize_origin(value: str) -> str:
    return value.strip().rstrip("/").lower()


# The widget keeps a visitor's conversation in their browser this long (docs/widget.md).
DEFAULT_REMEMBER_CONVERSATION_HOURS = 24
MAX_REMEMBER_CONVERSATION_HOURS = 24 * 30


class Client(TimeStampedModel):
    """A business using GuideDesk: the tenant. Everything else hangs off a client."""

    objects = RowCacheQuerySet.as_manager()

    slug = models.SlugField(max_length=50, unique=True, verbose_name=_("slug"))
    name = models.CharField(max_length=200, verbose_name=_("name"))
    plan = models.ForeignKey(
        Plan, on_delete=models.PROTECT, related_name="clients", verbose_name=_("plan")
    )
    language = models.CharField(
        max_length=16,
        default="en",
        help_text=_("Default reply language."),
        verbose_name=_("language"),
    )
    languages = models.JSONField(
        _("languages"),
        default=list,
        blank=True,
        help_text=_(
            'The languages the assistant answers in, e.g. ["en", "es", "he"]. Empty: only the '
            "default language. A customer writing in another language is answered in the default."
        ),
    )
    business_info = models.JSONField(
        default=dict,
        blank=True,
        help_text=_(
            "What the assistant knows about the business: about, contact, policies, FAQs and "
            "instructions for the assistant (the format is in docs/business-info.md)."
        ),
        verbose_name=_("business info"),
    )
    support_email = models.EmailField(
        blank=True,
        help_text=_("Escalations and usage alerts go here."),
        verbose_name=_("support email"),
    )
    widget_key = models.CharField(
        max_length=64, unique=True, default=new_widget_key, verbose_name=_("widget key")
    )
    # When a person answers a hand-off (apps/clients/business_hours.py); {} = not configured.
    business_hours = models.JSONField(
        _("business hours"),
        default=dict,
        blank=True,
        help_text=_(
            'When your team answers hand-offs, e.g. {"time_zone": "Europe/Berlin", "weekly": '
            '{"mon": ["09:00-17:00"], "sat": ["10:00-14:00"]}, "holidays": ["2026-12-25"]}. '
            "Outside them a hand-off tells the customer when a person will answer; empty = it "
            "says nothing about hours."
        ),
    )
    allowed_origins = models.JSONField(
        default=list,
        blank=True,
        help_text=_("Sites allowed to embed the widget."),
        verbose_name=_("allowed origins"),
    )
    greeting = models.CharField(
        max_length=500, blank=True, default="Hi! How can I help?", verbose_name=_("greeting")
    )
    show_sources = models.BooleanField(
        _("show sources"),
        default=True,
        help_text=_(
            "Under an answer taken from your help centre, show the customer the titles of the "
            "articles it came from, linked to their pages."
        ),
    )
    remember_conversation_hours = models.PositiveIntegerField(
        _("remember the conversation for (hours)"),
        default=DEFAULT_REMEMBER_CONVERSATION_HOURS,
        validators=[MaxValueValidator(MAX_REMEMBER_CONVERSATION_HOURS)],
        help_text=format_lazy(
            _(
                "How long a visitor's browser keeps their conversation after its last activity, "
                "so a returning visitor finds it (and staff replies sent while they were away). "
                "0 = only while the tab is open. At most {hours}."
            ),
            hours=MAX_REMEMBER_CONVERSATION_HOURS,
        ),
    )
    is_active = models.BooleanField(default=True, verbose_name=_("is active"))
    rubric = optional_fk(
        Rubric,
        _("rubric"),
        on_delete=models.PROTECT,
        related_name="clients",
        help_text=_("Deliberative mode's rubric for this client; empty = the plan's."),
    )
    # What this client's staff may try in the console's playground beyond the plan (a platform
    # operator's grant; docs/playground.md): a run may use the plan's mode or a cheaper one, and
    # at most the plan's refinement rounds, unless granted here.
    playground_modes = models.JSONField(
        _("extra playground modes"),
        default=list,
        blank=True,
        help_text=_(
            "Modes this client may also try in the playground, beyond its plan's, e.g. "
            '["deliberative"]. Empty = only the plan\'s mode and cheaper ones.'
        ),
    )
    playground_max_iterations = models.PositiveSmallIntegerField(
        _("playground refinement rounds"),
        null=True,
        blank=True,
        validators=[MaxValueValidator(10)],
        help_text=_(
            "Most refinement rounds a playground run may ask for (at most 10); empty = the "
            "plan's setting."
        ),
    )
    simulation_monthly_tokens = models.PositiveBigIntegerField(
        _("simulation tokens per month"),
        null=True,
        blank=True,
        help_text=_(
            "This client's own monthly token budget for simulations (granted by the platform); "
            "empty = the plan's."
        ),
    )
    # -- identity verification (apps/clients/identity.py, docs/widget.md) -------------------
    # The business's backend signs its signed-in customer's id with this secret (an HMAC of
    # the id, or an HS256 JWT) so the widget's visitor is a verified customer. Write-only:
    # generated and shown once in the admin; a rotation keeps the previous secret valid until
    # `identity_previous_secret_expires_at`.
    identity_secret = models.CharField(
        _("identity secret"), max_length=100, blank=True, editable=False
    )
    identity_previous_secret = models.CharField(
        max_length=100, blank=True, editable=False, verbose_name=_("identity previous secret")
    )
    identity_previous_secret_expires_at = models.DateTimeField(
        null=True, blank=True, editable=False, verbose_name=_("identity previous secret expires at")
    )
    identity_public_key = models.TextField(
        _("identity public key (RS256)"),
        blank=True,
        help_text=_(
            "Optional: a PEM public key (RSA). Identity tokens signed RS256 with its private key "
            "are accepted as well as those signed with the identity secret."
        ),
    )
    signin_url = models.URLField(
        _("sign-in page"),
        max_length=500,
        blank=True,
        help_text=_(
            "Where customers sign in to your site. A visitor who is not signed in and asks for "
            "something that needs it (a tool marked “customer scoped”) is sent here; empty: "
            "they are told to sign in to your site or to ask for a person."
        ),
    )
    require_mfa = models.BooleanField(
        _("require two-factor authentication"),
        default=False,
        help_text=_(
            "Staff of this client must set up an authenticator app (TOTP) before they can "
            "use the admin, the console or the staff API with a session."
        ),
    )

    class Meta:
        verbose_name = _("client")
        verbose_name_plural = _("clients")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def ai_mode(self) -> str:
        return self.plan.ai_mode

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        bi_errors = business_info_errors(self.business_info)
        if bi_errors:
            errors["business_info"] = [f"{path}: {msg}" for path, msg in bi_errors.items()]
        if not isinstance(self.allowed_origins, list) or not all(
            isinstance(o, str) for o in self.allowed_origins
        ):
            errors["allowed_origins"] = [gettext("Must be a list of origins.")]
        else:
            bad = []
            for origin in self.allowed_origins:
                try:
                    validate_origin(origin)
                except ValidationError as exc:
                    bad.extend(exc.messages)
            if bad:
                errors["allowed_origins"] = bad
            else:
                self.allowed_origins = [normalize_origin(o) for o in self.allowed_origins]
        hours_errors = business_hours_errors(self.business_hours)
        if hours_errors:
            errors["business_hours"] = [
                f"{path}: {msg}" if path else msg for path, msg in hours_errors.items()
            ]
        granted = self.playground_modes
        if not isinstance(granted, list) or not all(m in modes.names() for m in granted):
            errors["playground_modes"] = [
                _("Must be a list of modes: %(modes)s.") % {"modes": ", ".join(modes.names())}
            ]
        if errors:
            raise ValidationError(errors)


class IdentityTokenUse(TenantOwnedModel):
    """A JWT id (`jti`) already accepted for a client: an identity token is accepted once.
    Kept until the token expires (rows past it are pruned when the next one is stored)."""

    jti = models.CharField(max_length=255, verbose_name=_("jti"))
    expires_at = models.DateTimeField(verbose_name=_("expires at"))

    class Meta:
        verbose_name = _("identity token use")
        verbose_name_plural = _("identity token uses")
        constraints = [
            models.UniqueConstraint(fields=["client", "jti"], name="uniq_identity_jti_client")
        ]
        indexes = [models.Index(fields=["client", "expires_at"], name="identity_jti_expiry_idx")]
