"""How a trace's steps are shown — one specification for every surface that draws them: the
admin's trace pages (`step_html`), the console's playground page (the spec is embedded in the
page as JSON, `step_views_json`, and static/console/playground.js draws each card from it) and
`manage.py reason` (`step_lines`).

A step's view is its title and the fields of its output worth showing, each with a label and a
kind that says how:

- `text`: the value as a paragraph;
- `fact`: a short value on the step's facts line (`label value`);
- `badge`: a short value as a badge (`labels` maps values to what is shown);
- `progress`: a count out of the output field `total` (`3/10`, drawn as a bar);
- `list`: a list of strings, joined;
- `json`: any value as compact JSON;
- `scores`: a mapping of name → 0..1 score, drawn as bars;
- `issues`: a critique's issues (`kind`, `quote`, `problem`);
- `options`: the choices offered to the customer;
- `hypotheses`: intents with their confidence;
- `citations`: knowledge-base chunks (`title`, `chunk`, `score`, `tokens`), the title linked
  to the article's admin page where a surface can link.

A title or a label may name output fields in braces (`Step {step}/{max_steps}`). A step without
a view (or an output field without one) is shown as its raw output. Every step of the step
registry (apps/reasoning/steps) has a view; a test checks it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from django.urls import NoReverseMatch, reverse
from django.utils.functional import Promise
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from apps.reasoning.models import ReasoningStep

__all__ = [
    "STEP_VIEWS",
    "FieldView",
    "StepView",
    "step_html",
    "step_json",
    "step_lines",
    "step_title",
    "step_views_json",
]

Kind = Literal[
    "text",
    "fact",
    "badge",
    "progress",
    "list",
    "json",
    "scores",
    "issues",
    "options",
    "hypotheses",
    "citations",
]


# Titles and labels are marked for translation (lazy: resolved in the reader's language).
type Text = str | Promise
# Shortens a long value for a line of text (`step_lines`).
type Cut = Callable[[Any], str]


@dataclass(frozen=True)
class FieldView:
    key: str
    label: Text
    kind: Kind = "text"
    labels: dict[str, Text] = field(default_factory=dict)  # badge: value → what is shown
    suffix: str = ""  # after a fact's value: "/10"
    digits: int | None = None  # a number shown with this many decimals
    total: str = ""  # progress: the output field that holds the total


@dataclass(frozen=True)
class StepView:
    title: Text
    fields: tuple[FieldView, ...] = ()


def _draft_fields() -> tuple[FieldView, ...]:
    return (
        FieldView("confidence", _("Confidence"), "fact", suffix="/10"),
        FieldView("tool_call", _("Tool"), "fact"),
        FieldView("tool_params", _("Tool parameters"), "json"),
        FieldView("needs_more_context", _("Needs more context"), "list"),
        FieldView("missing_params", _("Missing parameters"), "list"),
        FieldView("response", _("Draft"), "text"),
    )


STEP_VIEWS: dict[str, StepView] = {
    # -- the LLM steps (apps/reasoning/steps) ---------------------------------------------------
    "respond": StepView(
        _("Respond"),
        (
            FieldView("tool_call", _("Tool"), "fact"),
            FieldView("tool_params", _("Tool parameters"), "json"),
            FieldView("response", _("Draft"), "text"),
        ),
    ),
    "assess": StepView(_("Assess"), _draft_fields()),
    "synthesize": StepView(_("Synthesize"), _draft_fields()),
    "compose": StepView(_("Compose"), (FieldView("response", _("Reply"), "text"),)),
    "critique": StepView(
        _("Critique"),
        (
            FieldView("decision", _("Decision"), "badge"),
            FieldView("reasoning", _("Reasoning"), "text"),
            FieldView("message", _("To the customer"), "text"),
        ),
    ),
    "clarify": StepView(
        _("Clarifying question"),
        (
            FieldView("question", _("Question"), "text"),
            FieldView("options", _("Options"), "options"),
        ),
    ),
    "evaluate": StepView(
        _("Evaluation"),
        (
            FieldView("valid", _("Valid"), "badge"),
            FieldView("improved_confidence", _("Improved confidence"), "fact", suffix="/10"),
            FieldView("evaluation", _("Evaluation"), "text"),
            FieldView("improved_response", _("Improved answer"), "text"),
        ),
    ),
    "reason_step": StepView(
        _("Step {step}/{max_steps}"),
        (
            FieldView("step", _("Progress"), "progress", total="max_steps"),
            FieldView(
                "status", _("Status"), "badge", {"final": _("Final"), "continue": _("Continue")}
            ),
            FieldView("mean", _("Mean"), "fact", digits=2),
            FieldView("content", _("Reasoning"), "text"),
            FieldView("scores", _("Scores"), "scores"),
            FieldView("rationale", _("Model's rationale"), "text"),
            FieldView("hypotheses", _("Hypotheses"), "hypotheses"),
        ),
    ),
    "feedback": StepView(
        _("Server feedback (LLM-generated) after step {step}"),
        # The words the model itself reads the feedback under (docs/llm-protocol.md), quoted as
        # the prompt has them: protocol text, not interface text, so not translated.
        (FieldView("feedback", "[Server Feedback from Step {step}]", "text"),),
    ),
    # The deliberative loop's own note on a step on course (no LLM call; loop.server_note).
    "feedback_note": StepView(
        _("Feedback"),
        (FieldView("feedback", "[Server Feedback from Step {step}]", "text"),),
    ),
    "refine_critique": StepView(
        _("Critique call (iteration {iteration})"),
        (
            FieldView("score", _("Score"), "fact", suffix="/100"),
            FieldView("critique", _("Critique"), "text"),
            FieldView("issues", _("Issues"), "issues"),
        ),
    ),
    "improve": StepView(
        _("Improve call (iteration {iteration})"), (FieldView("response", _("Improved"), "text"),)
    ),
    "insights": StepView(_("Insights"), (FieldView("topics", _("Topics"), "json"),)),
    "judge": StepView(_("Judged criteria"), (FieldView("results", _("Verdicts"), "json"),)),
    "simulate_customer": StepView(
        _("Simulated customer"),
        (
            FieldView("message", _("Message"), "text"),
            FieldView("done", _("Done"), "badge"),
        ),
    ),
    # -- what the pipeline records itself -------------------------------------------------------
    "refinement": StepView(
        _("Refinement · {state} (iteration {iteration})"),
        (
            FieldView("score", _("Score"), "fact", suffix="/100"),
            FieldView("failure", _("Failure"), "text"),
            FieldView("text", _("Text"), "text"),
            FieldView("critique", _("Critique"), "text"),
            FieldView("issues", _("Issues"), "issues"),
        ),
    ),
    "deliberation_trigger": StepView(
        _("Deliberating: adaptive's answer called for depth"),
        (
            FieldView(
                "trigger",
                _("Why"),
                "badge",
                {
                    "low_confidence": _("Low confidence"),
                    "complaint": _("A complaint or dispute"),
                    "critique_escalate": _("The critique would hand over"),
                    "evaluation_questioned": _("The evaluation questioned the draft"),
                },
            ),
            FieldView("confidence", _("Confidence"), "fact", suffix="/10"),
            FieldView("threshold", _("Deliberates below"), "fact", suffix="/10"),
            FieldView("signals", _("Signals"), "list"),
            FieldView("detail", _("Critique"), "text"),
        ),
    ),
    "deliberation_end": StepView(
        _("End of deliberation"),
        (
            FieldView("termination", _("Termination"), "fact"),
            FieldView("steps", _("Steps"), "fact"),
            FieldView("best_iteration", _("Best iteration"), "fact"),
            FieldView("final_score", _("Final score"), "fact"),
        ),
    ),
    "tool_not_run": StepView(
        _("Tool not run: tools never run in the playground"),
        (
            FieldView("verdict", _("Guards"), "badge"),
            FieldView("tool", _("Tool"), "fact"),
            FieldView("params", _("Parameters"), "json"),
            FieldView("reason", _("Reason"), "fact"),
            FieldView("would_reply", _("The customer would have been told"), "text"),
        ),
    ),
    "context_fetch": StepView(
        _("Context fetch"),
        (
            FieldView("fetched", _("Fetched"), "list"),
            FieldView("kb", _("Knowledge searches"), "list"),
            FieldView("chunks", _("Excerpts found"), "fact"),
            FieldView("unknown", _("Unknown keys"), "list"),
        ),
    ),
    "knowledge": StepView(
        _("Knowledge: {query}"),
        (
            FieldView("tokens", _("Tokens"), "fact"),
            FieldView("budget", _("Budget"), "fact"),
            FieldView("purpose", _("For"), "fact"),
            FieldView("hits", _("Citations"), "citations"),
        ),
    ),
    "guard": StepView(
        _("Guards"),
        (
            FieldView("action", _("Action"), "badge"),
            FieldView("tool", _("Tool"), "fact"),
            FieldView("reason", _("Reason"), "text"),
        ),
    ),
    "approval_requested": StepView(
        _("Waiting for a teammate's approval: {tool}"),
        (
            FieldView("params", _("Parameters"), "json"),
            FieldView("rule", _("Rule"), "json"),
            FieldView("tripped", _("Sums over the threshold"), "json"),
            FieldView("expires_at", _("Expires"), "fact"),
            FieldView("idempotency_key", _("Idempotency key"), "fact"),
        ),
    ),
    "approval_approved": StepView(_("Approved by a teammate"), (FieldView("by", _("By"), "fact"),)),
    "approval_denied": StepView(
        _("Denied by a teammate"),
        (FieldView("by", _("By"), "fact"), FieldView("reason", _("Reason"), "text")),
    ),
    "approval_run": StepView(
        _("Approved action ran: {tool}"),
        (
            FieldView("ok", _("Succeeded"), "badge"),
            FieldView("params", _("Parameters"), "json"),
            FieldView("result", _("Result"), "json"),
            FieldView("error", _("Error"), "text"),
            FieldView("idempotency_key", _("Idempotency key"), "fact"),
        ),
    ),
    "approval_expired": StepView(
        _("No teammate decided in time: handed to a person"),
        (FieldView("minutes", _("Waited (minutes)"), "fact"),),
    ),
    "approval_withdrawn": StepView(
        _("Withdrawn by the customer"),
        (
            FieldView("because", _("Withdrawn because"), "badge"),
            FieldView("seq", _("Message #"), "fact"),
        ),
    ),
    "approval_answer": StepView(
        _("Told the customer about a held action"),
        (
            FieldView("withdrawn", _("Withdrawn"), "json"),
            FieldView("answer_only", _("Whole answer (no model call)"), "badge"),
        ),
    ),
    "precondition": StepView(
        _("Checked before asking: {tool}"),
        (
            FieldView(
                "outcome",
                _("Outcome"),
                "badge",
                {
                    "allowed": _("Possible: asked"),
                    "not_possible": _("Not possible: not asked"),
                    "unknown": _("Unknown: asked as usual"),
                },
            ),
            FieldView("read_tool", _("Read with"), "fact"),
            FieldView("state", _("State"), "fact"),
            FieldView("allowed", _("Allowed states"), "list"),
            FieldView("reason", _("Reason"), "fact"),
        ),
    ),
    "unavailable_tool": StepView(
        _("A tool the client does not have"),
        (
            FieldView(
                "reply", _("Reply"), "badge", {"draft": _("Draft"), "handoff": _("Hand-off")}
            ),
            FieldView("tool", _("Tool"), "fact"),
            FieldView("reason", _("Reason"), "fact"),
            FieldView("problem", _("Why not the draft"), "text"),
        ),
    ),
    "critique_floor": StepView(
        _("Critique floor: PROCEED not followed"),
        (
            FieldView(
                "action", _("Action"), "badge", {"clarify": _("Clarify"), "handoff": _("Hand-off")}
            ),
            FieldView("confidence", _("Confidence"), "fact", suffix="/10"),
            FieldView("floor", _("Floor"), "fact", suffix="/10"),
            FieldView("missing_params", _("Missing parameters"), "list"),
        ),
    ),
    "escalate": StepView(
        _("Hand over to a person"),
        (FieldView("reason", _("Reason"), "badge"), FieldView("detail", _("Detail"), "text")),
    ),
    "stopped": StepView(_("Stopped"), (FieldView("reason", _("Reason"), "text"),)),
    "aborted": StepView(_("Aborted"), (FieldView("reason", _("Reason"), "text"),)),
}

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
INLINE = ("progress", "fact", "badge")  # the kinds shown together on one line


def step_view(name: str) -> StepView | None:
    return STEP_VIEWS.get(name)


def _filled(template: Text, output: dict[str, Any]) -> str:
    """`template` with its `{field}` placeholders filled from the output (`?` for a missing
    one)."""

    def fill(match: re.Match[str]) -> str:
        value = output.get(match.group(1))
        return "?" if value is None or value == "" else str(value).replace("_", " ")

    return _PLACEHOLDER.sub(fill, str(template))


def step_title(name: str, output: dict[str, Any]) -> str:
    """The step's title, its placeholders filled from the output."""
    view = STEP_VIEWS.get(name)
    return name if view is None else _filled(view.title, output)


def step_views_json() -> dict[str, Any]:
    """The specification as the playground page embeds it (`json_script`)."""
    return {
        name: {"title": str(view.title), "fields": [_field_json(f) for f in view.fields]}
        for name, view in STEP_VIEWS.items()
    }


def _field_json(view: FieldView) -> dict[str, Any]:
    data = asdict(view)
    data["label"] = str(view.label)
    data["labels"] = {value: str(shown) for value, shown in view.labels.items()}
    return data


def step_json(step: ReasoningStep) -> dict[str, Any]:
    """A step as the event streams and `manage.py reason --json` carry it."""
    return {
        "index": step.index,
        "name": step.name,
        "input_summary": step.input_summary,
        "output": step.output,
        "error": step.error,
        "latency_ms": step.latency_ms,
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
    }


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _present(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def _shown(view: FieldView, value: Any) -> str:
    """A field's value as one line of text (the text surfaces)."""
    if view.digits is not None and isinstance(value, int | float):
        value = f"{value:.{view.digits}f}"
    if view.kind == "fact":
        return f"{value}{view.suffix}"
    if view.kind == "badge":
        return str(view.labels.get(str(value), value))
    if view.kind in ("list", "options") and isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if view.kind == "json":
        return _compact(value)
    return str(value)


def _progress(value: Any, total: Any, width: int = 20) -> str:
    """`[########------------] 4/10`"""
    step, most = int(value or 0), max(int(total or 0), 1)
    filled = round(width * min(step, most) / most)
    return f"[{'#' * filled}{'-' * (width - filled)}] {step}/{total or '?'}"


def _field_rows(name: str, output: dict[str, Any]) -> list[tuple[FieldView, Any]]:
    view = STEP_VIEWS.get(name)
    if view is None:
        return []
    return [(f, output[f.key]) for f in view.fields if _present(output.get(f.key))]


def _shown_keys(name: str) -> set[str]:
    view = STEP_VIEWS.get(name)
    return {f.key for f in view.fields} if view else set()


def _citation(c: dict[str, Any]) -> str:
    """`Title › heading` (chunk n, score s, t tokens)."""
    heading = c.get("heading") or c.get("title")
    return (
        f"{heading} ({_('chunk')} {c.get('chunk')}, {_('score')} {c.get('score')}, "
        f"{c.get('tokens')} {_('tokens')})"
    )


def article_admin_url(article_id: Any) -> str:
    """The article's admin page ('' where the knowledge admin is not installed)."""
    try:
        return reverse("admin:knowledge_article_change", args=[article_id])
    except NoReverseMatch:
        return ""


def _citation_html(c: dict[str, Any]) -> SafeString:
    url = article_admin_url(c.get("article_id")) if c.get("article_id") else ""
    title = c.get("title") or c.get("article") or "?"
    linked = format_html('<a href="{}">{}</a>', url, title) if url else format_html("{}", title)
    heading = c.get("heading") or ""
    section = f" › {heading.split(' › ', 1)[1]}" if " › " in heading else ""
    return format_html(
        '<span class="gd-citation">{}{} ({} {}, {} {}, {} {})</span>',
        linked,
        section,
        _("chunk"),
        c.get("chunk"),
        _("score"),
        c.get("score"),
        c.get("tokens"),
        _("tokens"),
    )


# -- text (`manage.py reason`) ------------------------------------------------------------------
def _bar(value: float, width: int = 10) -> str:
    value = min(max(value, 0.0), 1.0)
    filled = round(width * value)
    return f"{'█' * filled}{'·' * (width - filled)} {value:.2f}"


def _score_lines(value: dict[str, Any], cut: Cut) -> list[str]:
    return [
        f"      {key:<22} {_bar(float(score))}"
        for key, score in value.items()
        if isinstance(score, int | float)
    ]


def _issue_lines(value: list[Any], cut: Cut) -> list[str]:
    return [
        f"    - [{issue.get('kind')}] “{cut(issue.get('quote'))}”: {cut(issue.get('problem'))}"
        for issue in value
        if isinstance(issue, dict)
    ]


def _hypothesis_lines(value: list[Any], cut: Cut) -> list[str]:
    return [
        f"    hypothesis: {h.get('intent')} ({h.get('confidence')})"
        for h in value
        if isinstance(h, dict)
    ]


def _citation_lines(value: list[Any], cut: Cut) -> list[str]:
    return [f"    cited: {_citation(c)}" for c in value if isinstance(c, dict)]


# The field kinds shown as lines of their own, each with the type of value it draws: a value of
# another type, and every other kind, is one `label: value` line.
_LINES_BY_KIND: dict[Kind, tuple[type, Callable[[Any, Cut], list[str]]]] = {
    "scores": (dict, _score_lines),
    "issues": (list, _issue_lines),
    "hypotheses": (list, _hypothesis_lines),
    "citations": (list, _citation_lines),
}


def _field_lines(f: FieldView, value: Any, output: dict[str, Any], cut: Cut) -> list[str]:
    drawn = _LINES_BY_KIND.get(f.kind)
    if drawn is not None and isinstance(value, drawn[0]):
        return drawn[1](value, cut)
    return [f"    {_filled(f.label, output)}: {cut(_shown(f, value))}"]


def _head_line(step: ReasoningStep, output: dict[str, Any]) -> str:
    """`[index] name — title · tokens, latency` (the title only where it says more)."""
    tokens = step.prompt_tokens + step.completion_tokens
    meta = f" · {tokens} tokens, {step.latency_ms} ms" if tokens else ""
    title = step_title(step.name, output)
    named = f" — {title}" if title.lower() != step.name.replace("_", " ") else ""
    return f"[{step.index}] {step.name}{named}{meta}"


def step_lines(step: ReasoningStep, *, cut: Cut = str) -> list[str]:
    """The step as lines of text: a head line, then one line per field shown (indented).
    `cut` shortens long text (the command's --step-by-step shows it whole)."""
    output = step.output or {}
    lines = [_head_line(step, output)]
    if step.error:
        lines.append(f"    error: {cut(step.error)}")
    rows = _field_rows(step.name, output)
    if step.name not in STEP_VIEWS:
        if output:
            lines.append(f"    {cut(_compact(output))}")
        return lines
    facts = [
        _progress(v, output.get(f.total))
        if f.kind == "progress"
        else f"{_filled(f.label, output)} {_shown(f, v)}"
        for f, v in rows
        if f.kind in INLINE
    ]
    if facts:
        lines.append("    " + " · ".join(facts))
    for f, value in rows:
        if f.kind not in INLINE:
            lines.extend(_field_lines(f, value, output, cut))
    return lines


# -- HTML (the admin) ---------------------------------------------------------------------------
def step_html(step: ReasoningStep) -> SafeString:
    """The step's fields as the admin shows them (everything escaped), then what the view does
    not name as raw JSON."""
    output = step.output or {}
    rows = _field_rows(step.name, output)
    parts: list[SafeString] = [
        format_html(
            '<p class="gd-step-title"><strong>{}</strong></p>', step_title(step.name, output)
        )
    ]
    for f, value in rows:
        if f.kind == "scores" and isinstance(value, dict):
            body = format_html_join(
                ", ", "{} {}", ((k, _shown(f, v)) for k, v in sorted(value.items()))
            )
        elif f.kind == "issues" and isinstance(value, list):
            body = format_html_join(
                "",
                "<br>[{}] “{}”: {}",
                (
                    (i.get("kind"), i.get("quote"), i.get("problem"))
                    for i in value
                    if isinstance(i, dict)
                ),
            )
        elif f.kind == "hypotheses" and isinstance(value, list):
            body = format_html_join(
                ", ",
                "{} ({})",
                ((h.get("intent"), h.get("confidence")) for h in value if isinstance(h, dict)),
            )
        elif f.kind == "citations" and isinstance(value, list):
            body = format_html_join(
                "", "<br>{}", ((_citation_html(c),) for c in value if isinstance(c, dict))
            )
        elif f.kind == "progress":
            body = format_html("{}/{}", value, output.get(f.total) or "?")
        else:
            body = format_html("{}", _shown(f, value))
        parts.append(
            format_html(
                '<p class="gd-step-field gd-kind-{}"><span class="gd-label">{}</span>: {}</p>',
                f.kind,
                _filled(f.label, output),
                body,
            )
        )
    rest = {k: v for k, v in output.items() if k not in _shown_keys(step.name)}
    if rest:
        parts.append(
            format_html(
                '<pre class="gd-step-raw">{}</pre>',
                json.dumps(rest, indent=2, ensure_ascii=False, default=str),
            )
        )
    return format_html_join("", "{}", ((p,) for p in parts))


# ---------------------------------------------------------------------------------------------
# A deliberative plan's turn that the per-conversation or per-visitor limits ran adaptive
# (`deliberative_cap`, apps/billing/services/visitors.py), in words: the debug view says so on
# the turn and the usage page counts them by reason — never a silent downgrade.
# ---------------------------------------------------------------------------------------------

DELIBERATIVE_CAP_STEP = "deliberative_cap"
DELIBERATIVE_CAP_REASONS: dict[str, Text] = {
    "visitor_budget": _("visitor budget"),
    "conversation_budget": _("conversation budget"),
    "hourly_cap": _("deliberative turns per hour"),
}


def deliberative_cap_text(output: dict[str, Any]) -> str:
    """Why the turn ran adaptive instead of deliberative, for staff."""
    reason = str(output.get("reason") or "")

    def number(name: str) -> str:
        value = output.get(name)
        return f"{int(value):,}" if isinstance(value, int | float) else "?"

    if reason == "visitor_budget":
        return str(
            _(
                "The visitor's daily token budget had %(used)s of %(budget)s tokens used or "
                "held, too little left for a deliberative turn, so this turn ran adaptive."
            )
            % {"used": number("used"), "budget": number("budget")}
        )
    if reason == "conversation_budget":
        return str(
            _(
                "The conversation's token budget had %(used)s of %(budget)s tokens used, too "
                "little left for a deliberative turn, so this turn ran adaptive."
            )
            % {"used": number("used"), "budget": number("budget")}
        )
    if reason == "hourly_cap":
        return str(
            _(
                "The plan allows %(limit)s deliberative turns per conversation an hour and "
                "%(count)s had run, so this turn ran adaptive."
            )
            % {"limit": number("limit"), "count": number("deliberative_last_hour")}
        )
    return str(_("A limit ran this turn adaptive instead of deliberative (%(reason)s).")) % {
        "reason": reason or "?"
    }
