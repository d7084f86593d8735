import copy
import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import ApiKey
from apps.billing.models import ModelPrice
from apps.clients.deliberation import deliberation_settings
from apps.clients.models import Client, Plan
from apps.core.exceptions import ApplicationError
from apps.knowledge.models import Article, ArticleChunk
from apps.knowledge.selectors import business_info_for, faqs_for
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from apps.tools.models import ClientTool
from tests.conftest import DEMO_TENANT

pytestmark = pytest.mark.django_db

MODELS: list[Any] = [ModelPrice, Plan, Client, ClientTool, ApiKey, Article, ArticleChunk]


def snapshot():
    return {m.__name__: list(m._base_manager.order_by("pk").values()) for m in MODELS}


def run_import(path) -> dict:
    out = StringIO()
    call_command("import_client", str(path), stdout=out)
    return json.loads(out.getvalue())


def demo_data() -> dict:
    return load_tenant_file(DEMO_TENANT)


def test_demo_tenant_imports_everything():
    output = run_import(DEMO_TENANT)
    [entry] = output["clients"]
    client = Client.objects.get(slug=entry["slug"])
    assert entry["widget_key"] == client.widget_key
    assert entry["api_key"].startswith("gd_")
    assert ApiKey.objects.get(client=client).matches(entry["api_key"])
    assert client.plan.slug == "pro"
    assert client.plan.ai_mode == "adaptive"
    # the FAQs became FAQ articles; the assistant's document still has them
    assert "faqs" not in client.business_info
    assert len(faqs_for(client=client)) == len(demo_data()["clients"][0]["business_info"]["faqs"])
    assert len(business_info_for(client)["faqs"]) >= 10
    kinds = set(ClientTool.objects.for_client(client).values_list("kind", flat=True))
    assert kinds == {"read", "action", "destructive"}
    assert ModelPrice.objects.filter(model="gpt-4o-mini").exists()
    assert ClientTool.objects.get(client=client, name="gift_card_balance").enabled is False


def test_import_is_idempotent(tmp_path):
    first = run_import(DEMO_TENANT)
    before = snapshot()
    second = run_import(DEMO_TENANT)
    assert snapshot() == before  # not a single row or timestamp changed
    assert second["clients"][0]["api_key"] is None
    assert second["clients"][0]["widget_key"] == first["clients"][0]["widget_key"]
    assert ApiKey.objects.unscoped("test checks the database directly").count() == 1


def test_import_updates_changed_fields(tmp_path):
    run_import(DEMO_TENANT)
    data = demo_data()
    assert Client.objects.get(slug="trailhead").remember_conversation_hours == 24  # default
    data["clients"][0]["widget"]["greeting"] = "Howdy!"
    data["clients"][0]["widget"]["remember_conversation_hours"] = 0
    data["clients"][0]["tools"][0]["enabled"] = False
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    run_import(path)
    client = Client.objects.get(slug="trailhead")
    assert client.greeting == "Howdy!"
    assert client.remember_conversation_hours == 0
    assert not ClientTool.objects.get(
        client=client, name=data["clients"][0]["tools"][0]["name"]
    ).enabled


def _broken(mutate) -> dict:
    data = demo_data()
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda d: d["clients"][0]["business_info"]["faqs"][3].pop("answer"),
            "clients[0].business_info",
        ),
        (lambda d: d["plans"][1].update(ai_mode="turbo"), "plans[1].ai_mode"),
        (
            lambda d: d["plans"][0]["mode_multipliers"].update(adaptive="-2"),
            "plans[0].mode_multipliers.adaptive",
        ),
        (
            lambda d: d["clients"][0]["tools"][2].update(kind="dangerous"),
            "clients[0].tools[2].kind",
        ),
        (
            lambda d: d["clients"][0]["tools"][1]["parameters"].update(type=7),
            "clients[0].tools[1].parameters",
        ),
        (
            lambda d: d["clients"][0]["widget"].update(allowed_origins=["not an origin"]),
            "clients[0].widget.allowed_origins",
        ),
        (
            lambda d: d["clients"][0]["widget"].update(remember_conversation_hours=721),
            "clients[0].widget.remember_conversation_hours",
        ),
        (
            lambda d: d["clients"][0]["widget"].update(remember_conversation_hours=-1),
            "clients[0].widget.remember_conversation_hours",
        ),
        (lambda d: d["clients"][0].update(support_email="nope"), "clients[0].support_email"),
        (lambda d: d["clients"][0].update(colour="red"), "clients[0].colour"),
        (
            lambda d: d["model_prices"][0].update(input_per_million="abc"),
            "model_prices[0].input_per_million",
        ),
        (lambda d: d["clients"][0].update(plan="platinum"), "clients[0].plan"),
    ],
)
def test_bad_file_names_the_field_and_changes_nothing(mutate, path):
    before = snapshot()
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=_broken(mutate))
    assert path in exc.value.extra["fields"], exc.value.extra
    assert path in exc.value.message
    assert snapshot() == before


def test_bad_file_after_valid_sections_rolls_back_everything():
    # prices and plans are valid and processed first; the unknown plan fails last
    data = _broken(lambda d: d["clients"][0].update(plan="platinum"))
    with pytest.raises(ApplicationError):
        tenant_import(data=data)
    assert ModelPrice.objects.count() == 0
    assert Plan.objects.count() == 0


def test_command_reports_bad_json_and_bad_fields(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("import_client", str(bad))
    data = copy.deepcopy(demo_data())
    data["clients"][0]["tools"][0]["executor"] = {
        "type": "webhook",
        "url": "ftp://x",
        "secret": "s",
    }
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(data))
    with pytest.raises(CommandError) as exc:
        call_command("import_client", str(wrong))
    message = str(exc.value)
    assert "clients[0].tools[0].executor.url" in message
    assert "clients[0].tools[0].executor.secret" in message
    assert "Nothing was changed" in message
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_client", str(tmp_path / "missing.json"))


def test_plan_notes_settings_and_notes_tools_import(tmp_path):
    from apps.tools.builtins import ADD_NOTE_PARAMETERS, SEARCH_NOTES_PARAMETERS

    data = demo_data()
    data["plans"][1]["notes"] = {"enabled": False, "retention_days": 30, "prompt_budget_tokens": 0}
    data["clients"][0]["tools"] += [
        {
            "name": "search_notes",
            "description": "Search earlier notes.",
            "kind": "read",
            "parameters": SEARCH_NOTES_PARAMETERS,
            "executor": {"type": "builtin", "handler": "notes.search_notes"},
        },
        {
            "name": "add_note",
            "description": "Save a lesson.",
            "kind": "action",
            "parameters": ADD_NOTE_PARAMETERS,
            "executor": {"type": "builtin", "handler": "notes.add_note"},
        },
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    run_import(path)
    plan = Plan.objects.get(slug=data["plans"][1]["slug"])
    assert (plan.notes_enabled, plan.notes_retention_days, plan.notes_prompt_budget_tokens) == (
        False,
        30,
        0,
    )
    other = Plan.objects.get(slug=data["plans"][0]["slug"])
    assert (other.notes_enabled, other.notes_retention_days, other.notes_prompt_budget_tokens) == (
        True,
        90,
        400,
    )
    tool = ClientTool.objects.unscoped("test checks the database directly").get(name="add_note")
    assert (tool.kind, tool.builtin_handler) == ("action", "notes.add_note")


def test_plan_notes_retention_must_be_at_least_a_day():
    data = demo_data()
    data["plans"][0]["notes"] = {"retention_days": 0}
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=data)
    assert "plans[0].notes.retention_days" in exc.value.extra["fields"]


def test_plan_deliberation_settings_import_and_stay_when_left_out():
    data = load_tenant_file(DEMO_TENANT)
    data["plans"][0]["deliberation"] = {"max_steps": 6, "refinement_iterations": 1}
    tenant_import(data=data)
    plan = Plan.objects.get(slug=data["plans"][0]["slug"])
    own = deliberation_settings(plan)
    assert (own.min_steps, own.max_steps, own.refinement_iterations) == (None, 6, 1)
    assert own.refinement_stop_score == 90
    del data["plans"][0]["deliberation"]
    tenant_import(data=data)
    plan.refresh_from_db()
    assert deliberation_settings(plan).max_steps == 6  # what was set stays


@pytest.mark.parametrize(
    ("deliberation", "field"),
    [
        ({"refinement_iterations": 6}, "plans[0].deliberation.refinement_iterations"),
        ({"rounds": 1}, "plans[0].deliberation.rounds"),
        ({"min_steps": 6, "max_steps": 5}, "plans[0].deliberation"),
    ],
)
def test_plan_deliberation_settings_are_validated(deliberation, field):
    data = load_tenant_file(DEMO_TENANT)
    data["plans"][0]["deliberation"] = deliberation
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=data)
    assert field in exc.value.extra["fields"]
