"""The mode registry: every mode module registers itself with all its parts, and what reads
modes — plan choices and multipliers, the tenant import, the admin, the playground, billing —
reads the registry, so a mode added as one module is picked up everywhere."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from apps.clients import modes
from apps.clients.models import Plan
from apps.clients.modes import Deliberation, Mode, ModeDefinitionError, ModeHelp, TokenReserve
from apps.provisioning.services import tenant_import
from apps.reasoning import steps
from apps.reasoning.modes import mode_that_runs, runner
from tests.factories import ClientFactory, PlanFactory

NAMES = modes.names()


def test_the_shipped_modes_are_registered_cheapest_first() -> None:
    shipped = ["standard", "adaptive", "deliberative"]
    assert [name for name in NAMES if name in shipped] == shipped


@pytest.mark.parametrize("name", NAMES)
def test_every_mode_is_registered_with_all_its_parts(name: str) -> None:
    mode = modes.get(name)
    assert mode.name == name
    assert mode.label and mode.summary
    assert callable(mode.run)
    assert runner(name) is mode.run
    assert mode_that_runs(name) == name
    assert Decimal("0") <= mode.default_multiplier
    assert (name, mode.label) in Plan._meta.get_field("ai_mode").choices
    # What it does, which streaming, billing, the admin help and the charts read
    # (tests/reasoning/test_mode_declarations.py checks each follows it).
    assert isinstance(mode.streams, bool)
    assert isinstance(mode.deliberates, Deliberation)
    assert isinstance(mode.token_reserve, TokenReserve)
    assert re.fullmatch(r"#[0-9a-f]{6}", mode.color)
    assert mode.help.happens and mode.help.llm_calls and mode.help.cost_effect


def test_the_shipped_modes_declare_what_they_do() -> None:
    declared = {
        m.name: (m.streams, m.deliberates, m.token_reserve)
        for m in modes.modes()
        if m.name in ("standard", "adaptive", "deliberative", "as_needed")
    }
    assert declared == {
        "standard": (True, Deliberation.NEVER, TokenReserve.TURN),
        "adaptive": (True, Deliberation.NEVER, TokenReserve.TURN),
        "deliberative": (False, Deliberation.ALWAYS, TokenReserve.DELIBERATIVE),
        "as_needed": (True, Deliberation.WHEN_NEEDED, TokenReserve.DELIBERATIVE),
    }


def test_every_mode_has_its_own_chart_colour() -> None:
    colors = [m.color for m in modes.modes()]
    assert len(set(colors)) == len(colors)


@pytest.mark.parametrize("name", NAMES)
def test_every_step_a_mode_runs_is_a_registered_step(name: str) -> None:
    assert set(modes.get(name).steps) <= set(steps.names())


@pytest.mark.django_db
@pytest.mark.parametrize("name", NAMES)
def test_a_plan_bills_every_mode_at_its_default_unless_it_says_otherwise(name: str) -> None:
    plan = PlanFactory(multipliers={})
    assert plan.multiplier_for(name) == modes.get(name).default_multiplier
    plan.multipliers = {name: "4.25"}
    plan.full_clean()
    plan.save()
    plan.refresh_from_db()
    assert plan.multiplier_for(name) == Decimal("4.25")


@pytest.mark.django_db
@pytest.mark.parametrize("name", NAMES)
def test_the_tenant_import_takes_every_mode_and_its_multiplier(name: str) -> None:
    tenant_import(
        data={
            "plans": [
                {"slug": "p", "name": "P", "ai_mode": name, "mode_multipliers": {name: "3.5"}}
            ]
        }
    )
    plan = Plan.objects.get(slug="p")
    assert plan.ai_mode == name
    assert plan.multiplier_for(name) == Decimal("3.5")
    # Every other mode gets its default, written out like the admin writes it.
    assert plan.multipliers == {
        other: modes.multiplier_text(Decimal("3.5") if other == name else m.default_multiplier)
        for other, m in ((m.name, m) for m in modes.modes())
    }


@pytest.mark.django_db
def test_the_tenant_import_refuses_an_unknown_mode() -> None:
    from apps.core.exceptions import ApplicationError

    with pytest.raises(ApplicationError) as caught:
        tenant_import(
            data={
                "plans": [
                    {"slug": "p", "name": "P", "ai_mode": "turbo"},
                    {"slug": "q", "name": "Q", "mode_multipliers": {"turbo": "2"}},
                ]
            }
        )
    fields = caught.value.extra["fields"]
    assert (
        fields["plans[0].ai_mode"]
        == "Input should be " + ", ".join(f"'{n}'" for n in NAMES[:-1]) + f" or '{NAMES[-1]}'"
    )
    assert fields["plans[1].mode_multipliers"].startswith("unknown mode 'turbo'")
    assert not Plan.objects.filter(slug__in=["p", "q"]).exists()


@pytest.mark.django_db
def test_the_plan_admin_has_one_multiplier_row_per_mode(admin_client: Any) -> None:
    plan = PlanFactory(multipliers={"adaptive": "1.75"})
    url = reverse("admin:clients_plan_change", args=[plan.pk])
    page = admin_client.get(url).content.decode()
    for mode in modes.modes():
        assert f'name="multiplier_{mode.name}"' in page
    form = admin_client.get(url).context["adminform"].form
    assert form.initial["multiplier_adaptive"] == Decimal("1.75")  # the plan's own value
    assert form.initial["multiplier_standard"] == modes.get("standard").default_multiplier
    assert re.search(r'name="multiplier_adaptive"[^>]*value="1.75', page)
    data = {k: v for k, v in form.initial.items() if v is not None and k in form.fields}
    data.update(
        {
            "name": plan.name,
            "slug": plan.slug,
            "ai_mode": "deliberative",
            **{f"multiplier_{name}": "2.000" for name in NAMES},
            "multiplier_adaptive": "1.250",
        }
    )
    data = {k: v for k, v in data.items() if not isinstance(v, (list, dict))}
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    plan.refresh_from_db()
    assert plan.multipliers["adaptive"] == "1.250"
    assert plan.multiplier_for("standard") == Decimal("2")


def test_the_ai_mode_help_of_the_plan_admin_covers_every_mode() -> None:
    from apps.clients.admin import AI_MODE_HELP

    for mode in modes.modes():
        # The mode as people choose it: its label's lead ("Deliberate when needed — …").
        name = mode.label.split(" — ")[0]
        assert f"<strong>{name}</strong>" in str(AI_MODE_HELP), mode.name


@pytest.mark.parametrize("name", NAMES)
def test_every_mode_s_help_row_is_translated_for_spanish_staff(name: str) -> None:
    from apps.clients.admin import AI_MODE_HELP

    help_row = modes.get(name).help
    with translation.override("es"):
        for part in (help_row.happens, help_row.llm_calls, help_row.cost_effect):
            assert gettext(part) != part, part
            assert gettext(part) in str(AI_MODE_HELP)


@pytest.mark.django_db
def test_the_playground_offers_every_mode_up_to_the_plan_s(client_a: Any) -> None:
    from apps.playground.services import playground_allowed_modes, playground_modes

    assert playground_modes() == NAMES
    for name in NAMES:
        client = ClientFactory(plan=PlanFactory(ai_mode=name))
        rank = modes.get(name).cost_rank
        assert playground_allowed_modes(client=client) == [
            m.name for m in modes.modes() if m.cost_rank <= rank
        ]


@pytest.fixture
def scratch_mode() -> Any:
    mode = modes.register(
        Mode(
            name="scratch",
            label="Scratch — a mode defined in a test",
            summary="Runs `respond` only.",
            steps=("respond",),
            default_multiplier=Decimal("0.5"),
            cost_rank=5,
            message_kinds=(),
            streams=True,
            deliberates=Deliberation.NEVER,
            token_reserve=TokenReserve.TURN,
            color="#010203",
            help=ModeHelp(happens="Runs respond.", llm_calls="1", cost_effect="low"),
            run=lambda turn: None,
        )
    )
    yield mode
    modes.unregister("scratch")


@pytest.mark.django_db
def test_a_registered_mode_is_a_plan_choice_with_its_default_multiplier(scratch_mode: Any) -> None:
    plan = PlanFactory.build(slug="s", ai_mode="scratch", multipliers={})
    plan.full_clean()
    assert plan.multiplier_for("scratch") == Decimal("0.5")
    assert mode_that_runs("scratch") == "scratch"


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "Not A Name"},
        {"label": ""},
        {"steps": ()},
        {"default_multiplier": "1.5"},
        {"default_multiplier": Decimal("-1")},
        {"run": None},
        {"streams": "yes"},
        {"deliberates": "always"},
        {"token_reserve": 2000},
        {"color": "blue"},
        {"help": "Runs respond."},
        {"help": ModeHelp(happens="", llm_calls="1", cost_effect="low")},
    ],
)
def test_a_mode_missing_a_part_is_refused(bad: dict[str, Any]) -> None:
    parts: dict[str, Any] = {
        "name": "incomplete",
        "label": "x",
        "summary": "x",
        "steps": ("respond",),
        "default_multiplier": Decimal("1"),
        "cost_rank": 1,
        "message_kinds": (),
        "streams": False,
        "deliberates": Deliberation.NEVER,
        "token_reserve": TokenReserve.TURN,
        "color": "#010203",
        "help": ModeHelp(happens="x", llm_calls="1", cost_effect="x"),
        "run": lambda turn: None,
        **bad,
    }
    with pytest.raises(ModeDefinitionError):
        Mode(**parts)


def test_two_modes_with_one_name_are_refused(scratch_mode: Any) -> None:
    with pytest.raises(ModeDefinitionError, match="two modes"):
        modes.register(Mode(**{**scratch_mode.__dict__, "label": "Another"}))
