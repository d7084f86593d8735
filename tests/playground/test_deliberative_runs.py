"""Deliberative playground runs: `manage.py reason --mode deliberative` end to end through the
real `openai` SDK against the scripted server, and on the offline demo model — each step, its
scores, the server feedback and the refinement states printed as they happen, the run's
progress kept, usage recorded as `playground` at the deliberative multiplier, no tool run."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import CommandError

from apps.billing.models import UsagePurpose, UsageRecord
from apps.playground.models import PlaygroundRun, RunStatus
from apps.reasoning.models import ReasoningTrace, TraceKind
from devtools.fake_llm import assess_reply
from tests.playground.conftest import reason
from tests.reasoning.test_deliberative import rc, script_loop
from tests.support.shop import make_shop

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop_on_adaptive(db, webhook):
    """A plan that runs adaptive: the playground lets its staff try deliberative first."""
    client = make_shop("adaptive", webhook.url(), slug="try-shop")
    client.plan.multipliers = {**client.plan.multipliers, "deliberative": "2.5"}
    client.plan.save()
    return client


def deliberate(*args: str) -> str:
    """`manage.py reason` on the try-shop in deliberative mode, with `args` after that."""
    return reason("--client", "try-shop", "--mode", "deliberative", *args)


def test_a_deliberative_run_through_the_real_sdk_prints_steps_feedback_and_refinement(
    shop_on_adaptive, llm, settings
):
    settings.REASONING_FEEDBACK_ON_COURSE_GAIN = -1  # the seed's feedback call after every step
    script_loop(llm, [0.5, 0.6, 0.7, 0.8])  # the target (0.75) is reached at step 4
    draft = "Returns are accepted within 30 days. We always refund shipping."
    llm.script(
        "synthesize",
        assess_reply(draft, confidence=8),
    )
    llm.script("refine_critique", rc(60, quote="We always refund shipping."), rc(95))
    llm.script("improve", {"response": "Returns are accepted within 30 days."})

    out = deliberate("--iterations", "2", "Can I return my stove?")

    assert "[##--------" in out and "1/10 · Status Continue · Mean 0.50" in out  # progress bar
    assert "4/10 · Status Continue · Mean 0.80" in out
    assert "      grounded               ████████·· 0.80" in out  # a principle's score bar
    assert "— Server feedback (LLM-generated) after step 1" in out
    assert "[Server Feedback from Step 1]: feedback after step 1: strengthen grounded" in out
    assert "Refinement · draft (iteration 0)" in out
    assert "Refinement · critique (iteration 1)" in out and "    Score 60/100" in out
    assert "- [missing_info] “We always refund shipping.”: says too little" in out
    assert "Refinement · final spec (iteration 1)" in out
    assert "Termination target_reached · Steps 4" in out
    assert "Answer: Returns are accepted within 30 days." in out

    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    assert (run.status, run.mode, run.iterations) == (RunStatus.DONE, "deliberative", 2)
    assert (run.progress_step, run.progress_max) == (4, 10)
    # 4 steps + 3 feedbacks + synthesis + 2 critiques + 1 improve, all metered as playground
    assert run.trace.llm_calls == len(llm.calls()) == 11
    usage = UsageRecord.objects.unscoped("test checks the database directly").filter(
        purpose=UsagePurpose.PLAYGROUND
    )
    assert usage.count() == 11 and set(usage.values_list("mode", flat=True)) == {"deliberative"}
    assert run.trace.billed_usd == sum(u.billed_usd for u in usage)
    # billed at the plan's deliberative multiplier (each record rounded on its own)
    assert run.trace.cost_usd > 0
    assert abs(run.trace.billed_usd - run.trace.cost_usd * Decimal("2.5")) < Decimal("1e-6")
    assert list(
        ReasoningTrace.objects.unscoped("test checks the database directly").values_list(
            "kind", flat=True
        )
    ) == [TraceKind.PLAYGROUND]
    # the feedback call saw the whole history and the rubric's definitions
    assert "reasoning 3" in llm.calls("feedback")[-1].prompt_text


def test_a_rubric_can_be_chosen_for_the_run(shop_on_adaptive, llm):
    script_loop(llm, [0.9, 0.9, 0.9, 0.9])
    llm.script(
        "synthesize",
        {"response": "Breathe.", "confidence": 8, "tool_call": None, "tool_params": {}},
    )
    out = deliberate("--iterations", "0", "--rubric", "contemplative", "--json", "Why?")
    trace = json.loads(out)
    end = next(s for s in trace["steps"] if s["name"] == "deliberation_end")
    assert end["output"]["rubric"] == "contemplative"
    assert "refine_critique" not in [s["name"] for s in trace["steps"]]
    with pytest.raises(CommandError, match="Unknown rubric 'nope'"):
        deliberate("--rubric", "nope", "Why?")


def test_the_offline_demo_model_runs_a_deliberative_turn(shop_on_adaptive, settings):
    settings.OPENAI_API_KEY = ""
    out = deliberate("What is your returns policy?")
    run = PlaygroundRun.objects.unscoped("test checks the database directly").get()
    names = list(run.trace.steps.order_by("index").values_list("name", flat=True))
    assert run.status == RunStatus.DONE and run.offline
    assert names.count("reason_step") >= 4 and "feedback" in names and "synthesize" in names
    assert names[-1] == "deliberation_end" or "tool_not_run" in names
    assert "Server feedback (LLM-generated) after step 3" in out and "offline demo model" in out
    assert run.progress_step == names.count("reason_step")
