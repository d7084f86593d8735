"""/console/playground/ — the reasoning playground (staff sign-in, the console's roles; one
client at a time): start a run, watch it live over server-sent events, stop it, replay it.

Viewers watch and replay; starting and stopping a run (which spends the client's budget) needs
the agent role, like every other console action. Every run id is looked up within the selected
client: another client's run answers 404 like a missing one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from django import forms
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from apps.api.permissions import SUPPORT, role_permits
from apps.clients.models import AIMode, Rubric
from apps.console.access import ConsoleAccess, console_view, json_view
from apps.console.views import MessageTextField
from apps.conversations.models import Conversation
from apps.conversations.selectors import conversation_get
from apps.core.exceptions import ApplicationError
from apps.playground import streams
from apps.playground.models import PlaygroundRun
from apps.playground.selectors import run_get, run_list
from apps.playground.services import (
    MAX_ITERATIONS,
    playground_allowed_iterations,
    playground_allowed_modes,
    playground_modes,
    playground_run_create,
    playground_run_stop,
)
from apps.reasoning.deliberation.config import deliberation_config
from apps.reasoning.modes import mode_that_runs
from apps.reasoning.rendering import step_views_json

DEFAULT_TARGET = 0.75  # the seed's target line, when the run's rubric does not say otherwise


def rubric_choices() -> list[tuple[str, str]]:
    """The rubrics a deliberative run may use ("" = the client's / plan's)."""
    return [(r.slug, r.name) for r in Rubric.objects.order_by("name")]


def run_target(run: PlaygroundRun) -> float:
    """The target line of a deliberative run's sparkline: its rubric's (or the plan's) TARGET."""
    if run.mode != AIMode.DELIBERATIVE:
        return DEFAULT_TARGET
    config = deliberation_config(client=run.client, plan=run.client.plan, rubric=run.rubric or None)
    return config.target


class RunForm(forms.Form):
    question = MessageTextField(label=gettext_lazy("Customer question"))
    mode = forms.ChoiceField(label=gettext_lazy("Mode"))
    rubric = forms.ChoiceField(label=gettext_lazy("Rubric"), required=False)
    iterations = forms.IntegerField(
        label=gettext_lazy("Refinement iterations"),
        required=False,
        min_value=0,
        max_value=MAX_ITERATIONS,
        help_text=gettext_lazy("Deliberative runs; empty = the plan's setting."),
    )
    conversation = forms.ChoiceField(label=gettext_lazy("In the context of"), required=False)

    def __init__(self, *args: Any, access: ConsoleAccess, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.access = access
        mode, rubric = cast(forms.ChoiceField, self.fields["mode"]), self.fields["rubric"]
        mode.choices = [(m, m.capitalize()) for m in playground_modes()]
        mode.initial = mode_that_runs(access.client.plan.ai_mode)
        mode.help_text = _("Your plan includes: %(modes)s.") % {
            "modes": ", ".join(playground_allowed_modes(client=access.client))
        }
        self.fields["iterations"].help_text = _(
            "Deliberative runs; empty = the plan's setting; at most %(most)d."
        ) % {"most": playground_allowed_iterations(client=access.client)}
        cast(forms.ChoiceField, rubric).choices = [
            ("", _("The client's / plan's rubric")),
            *rubric_choices(),
        ]
        recent = Conversation.objects.for_client(access.client).order_by("-updated_at")[:20]
        cast(forms.ChoiceField, self.fields["conversation"]).choices = [
            ("", _("No conversation (a new customer)"))
        ] + [
            (str(c.public_id), f"{str(c.public_id)[:8]} · {c.get_status_display()}") for c in recent
        ]

    def clean_conversation(self) -> Conversation | None:
        value = self.cleaned_data.get("conversation")
        if not value:
            return None
        conversation = conversation_get(client=self.access.client, public_id=value)
        if conversation is None:
            raise forms.ValidationError(_("No such conversation."))
        return conversation


def _run_url(access: ConsoleAccess, run: PlaygroundRun, **extra: str) -> str:
    query = access.query + "".join(f"&{k}={v}" for k, v in extra.items())
    return reverse("playground-run", args=[run.public_id]) + query


def _run_or_404(access: ConsoleAccess, public_id: str) -> PlaygroundRun:
    run = run_get(client=access.client, public_id=public_id)
    if run is None:
        raise Http404("No such run.")
    return run


def _index(
    request: HttpRequest, access: ConsoleAccess, form: RunForm | None = None, status: int = 200
) -> HttpResponse:
    return render(
        request,
        "console/playground.html",
        {
            "access": access,
            "form": form or RunForm(access=access),
            "can_start": access.can_act,
            "runs": [(run, _run_url(access, run)) for run in run_list(client=access.client)],
            "start_url": reverse("playground-start") + access.query,
        },
        status=status,
    )


@require_GET
@console_view()
def playground(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    return _index(request, access)


@require_POST
@console_view(minimum=SUPPORT)
def run_start(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    form = RunForm(request.POST, access=access)
    if not form.is_valid():
        return _index(request, access, form=form, status=400)
    data = form.cleaned_data
    try:
        run = playground_run_create(
            client=access.client,
            question=data["question"],
            mode=data["mode"],
            created_by=request.user,
            conversation=data["conversation"],
            rubric=data.get("rubric") or "",
            iterations=data.get("iterations"),
        )
    except ApplicationError as error:
        form.add_error(None, error.message)
        return _index(request, access, form=form, status=error.status)
    # The run starts once this request's transaction commits; the page watches it live.
    return redirect(_run_url(access, run))


@require_GET
@console_view()
def run_page(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    run = _run_or_404(access, public_id)
    replay = request.GET.get("replay") == "1"
    base = reverse("playground-run", args=[run.public_id])
    events_url = base + "events" + access.query + ("&replay=1" if replay else "")
    return render(
        request,
        "console/playground_run.html",
        {
            "access": access,
            "run": run,
            "trace": run.trace,
            "step_views": step_views_json(),
            "replay": replay,
            "events_url": events_url,
            "stop_url": base + "stop" + access.query,
            "replay_url": _run_url(access, run, replay="1"),
            "index_url": reverse("playground") + access.query,
            "can_stop": role_permits(access.role, SUPPORT) and not replay,
            "target": run_target(run),
        },
    )


@require_GET
@json_view
def run_events(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    run = run_get(client=access.client, public_id=public_id)
    if run is None:
        return JsonResponse({"error": {"code": "not_found", "message": "Not found."}}, status=404)
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or "-1"
    try:
        after = max(-1, min(int(raw), 65535))
    except ValueError:
        return JsonResponse(
            {"error": {"code": "invalid", "message": "after must be a step index."}}, status=400
        )
    replay = request.GET.get("replay") == "1"
    served_async = isinstance(request, ASGIRequest)
    stream: Iterator[str] | AsyncIterator[str]
    if replay and request.headers.get("Last-Event-ID"):
        stream = iter(["event: end\ndata: {}\n\n"])  # a replay is not resumed: it ended
    elif replay:
        stream = (
            streams.replay_stream_async(client=access.client, run_id=run.pk)
            if served_async
            else streams.replay_stream(client=access.client, run_id=run.pk)
        )
    elif served_async:
        stream = streams.run_stream_async(client=access.client, run_id=run.pk, after=after)
    else:
        stream = streams.run_stream(client=access.client, run_id=run.pk, after=after)
    response = StreamingHttpResponse(stream, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache, no-store"
    response["X-Accel-Buffering"] = "no"
    return cast(HttpResponse, response)  # a streaming response; the console decorators type it so


@require_POST
@json_view
def run_stop(request: HttpRequest, access: ConsoleAccess, public_id: str) -> HttpResponse:
    if not role_permits(access.role, SUPPORT):
        return JsonResponse(
            {"error": {"code": "permission_denied", "message": "This needs the agent role."}},
            status=403,
        )
    run = run_get(client=access.client, public_id=public_id)
    if run is None:
        return JsonResponse({"error": {"code": "not_found", "message": "Not found."}}, status=404)
    stopping = playground_run_stop(client=access.client, run=run)
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"stopping": stopping})
    return redirect(_run_url(access, run))
