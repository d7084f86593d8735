"""One specification of how steps are shown (apps/reasoning/rendering.py), used by the admin,
the playground page and `manage.py reason`: every registered step has a view naming fields the
step really records, and each surface draws a step from it."""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest

from apps.reasoning import steps
from apps.reasoning.models import ReasoningStep
from apps.reasoning.rendering import STEP_VIEWS, Kind, step_html, step_lines

# What the pipeline adds to a step's parsed output when it records it (`TurnRecorder.llm`'s
# `extra`): the deliberative loop's step number and mean, the refinement iteration.
RECORDED_EXTRAS = {"step", "max_steps", "mean", "iteration"}
KINDS = set(get_args(Kind))  # the kinds of field a view may name


@pytest.mark.parametrize("name", steps.names())
def test_every_registered_step_has_a_view_of_fields_it_records(name: str) -> None:
    assert name in STEP_VIEWS, f"add a view of the step {name!r} to apps/reasoning/rendering.py"
    view = STEP_VIEWS[name]
    recorded = set(steps.get(name).output.model_fields) | RECORDED_EXTRAS
    named = {f.key for f in view.fields} | set(re.findall(r"\{(\w+)\}", str(view.title)))
    assert named <= recorded, f"{name}: the view names fields the step never records"
    assert {f.kind for f in view.fields} <= KINDS
    assert view.fields, f"{name}: a view shows at least one field"


def sample_step(name: str, **output: Any) -> ReasoningStep:
    return ReasoningStep(
        index=3, name=name, output=output, prompt_tokens=90, completion_tokens=10, latency_ms=42
    )


def test_the_text_surface_draws_a_step_from_its_view() -> None:
    step = sample_step(
        "assess",
        response="It ships tomorrow.",
        confidence=9,
        tool_call="get_order_status",
        tool_params={"order_id": "TH-1"},
        needs_more_context=["policies"],
    )
    assert step_lines(step) == [
        "[3] assess · 100 tokens, 42 ms",
        "    Confidence 9/10 · Tool get_order_status",
        '    Tool parameters: {"order_id": "TH-1"}',
        "    Needs more context: policies",
        "    Draft: It ships tomorrow.",
    ]
    # a step without a view: its raw output
    assert step_lines(sample_step("notes", note_ids=[4])) == [
        "[3] notes · 100 tokens, 42 ms",
        '    {"note_ids": [4]}',
    ]


def test_the_html_surface_draws_the_same_fields_escaped() -> None:
    step = sample_step(
        "critique", decision="ESCALATE", reasoning="<b>unsure</b>", extra_field="kept"
    )
    html = str(step_html(step))
    assert "<strong>Critique</strong>" in html
    assert '<span class="gd-label">Decision</span>: ESCALATE' in html
    assert "&lt;b&gt;unsure&lt;/b&gt;" in html and "<b>unsure</b>" not in html
    # what the view does not name stays visible, as JSON
    assert "&quot;extra_field&quot;: &quot;kept&quot;" in html


def test_titles_and_labels_are_marked_for_translation() -> None:
    """Staff read these in their own language: every title and label goes through gettext
    (lazily), except the feedback header, which quotes the prompt's protocol words."""
    from django.utils.functional import Promise

    unmarked = [
        (name, text)
        for name, view in STEP_VIEWS.items()
        for text in (view.title, *(f.label for f in view.fields))
        if not isinstance(text, Promise) and not str(text).startswith("[Server Feedback")
    ]
    assert unmarked == []


def test_knowledge_citations_are_drawn_with_chunk_and_score() -> None:
    hit = {
        "article": "0b6c",
        "article_id": 7,
        "title": "Returns <policy>",
        "heading": "Returns <policy> › Refund window",
        "chunk": 1,
        "score": 0.42,
        "tokens": 80,
    }
    step = sample_step("knowledge", query="refund", hits=[hit], tokens=80, budget=700)
    lines = step_lines(step)
    assert lines[0].startswith("[3] knowledge — Knowledge: refund")
    assert "    cited: Returns <policy> › Refund window (chunk 1, score 0.42, 80 tokens)" in lines
    html = str(step_html(step))
    assert "Returns &lt;policy&gt;" in html and "<policy>" not in html
    assert "chunk 1, score 0.42, 80 tokens" in html
