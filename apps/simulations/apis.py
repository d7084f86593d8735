"""Staff / back-office simulation API: test cases (CRUD), runs (start, follow, stop) and each
run's case runs with their transcripts and checks. Every id is looked up within the client."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.permissions import READ, SUPPORT, StaffAPIView, acting_user
from apps.api.schema import (
    CLIENT_PARAMETER,
    ResourceSchema,
    choice_parameter,
    found_by_public_id,
    invalid_example,
    page_schema,
    public_id_path_parameter,
    write_responses,
)
from apps.api.serializers import validated_body
from apps.simulations.cases import simcase_create, simcase_delete, simcase_get, simcase_update
from apps.simulations.models import CaseRun, CaseStatus, RunSource, Side, SimCase, SimulationRun
from apps.simulations.selectors import simcase_list, simulation_run_get, simulation_run_list
from apps.simulations.serializers import (
    CaseRunFilterSerializer,
    CaseRunSerializer,
    SimCaseFilterSerializer,
    SimCaseSerializer,
    SimCaseWriteSerializer,
    SimulationEstimateSerializer,
    SimulationRunCreateSerializer,
    SimulationRunDetailSerializer,
    SimulationRunSerializer,
)
from apps.simulations.services import (
    simulation_run_create,
    simulation_run_estimate,
    simulation_run_stop,
)

CASES_TAG = "simulation cases"
RUNS_TAG = "simulation runs"

CASE_EXAMPLE: dict[str, Any] = {
    "id": "3f1c9a52-7c1e-4d3a-9b0e-1a2b3c4d5e6f",
    "name": "cancel-confirmed",
    "suite": "demo",
    "description": "A destructive tool waits for the customer's confirmation.",
    "tags": ["cancel", "destructive"],
    "history": [],
    "turns": [
        {
            "customer": "Please cancel order TH-10042",
            "expect": {
                "tool_proposed": {"name": "cancel_order", "params": {"order_id": "TH-10042"}}
            },
        },
        {
            "customer": "Yes, cancel it",
            "expect": {"tool_called": {"name": "cancel_order", "params": {"order_id": "TH-10042"}}},
        },
    ],
    "simulated": {},
    "expect": {"tool_called": {"name": "cancel_order", "times": 1}},
    "criteria": ["does not promise a refund"],
    "tools": {"cancel_order": {"ok": True, "result": {"cancelled": True}}},
    "repeat": 1,
    "enabled": True,
    "created_at": "2026-03-02T09:15:30.000000Z",
    "updated_at": "2026-03-02T09:15:30.000000Z",
}
CASE_WRITE_EXAMPLE = {
    key: value
    for key, value in CASE_EXAMPLE.items()
    if key not in {"id", "created_at", "updated_at", "simulated", "history"}
}
RUN_EXAMPLE: dict[str, Any] = {
    "id": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
    "name": "Deliberative?",
    "kind": "cases",
    "status": "running",
    "source": "api",
    "selection": {"suite": "demo"},
    "compare": True,
    "overrides": {"mode": "deliberative", "rubric": "support"},
    "progress": {"total": 64, "completed": 16, "percent": 25},
    "error": "",
    "created_by": None,
    "created_at": "2026-03-02T09:15:30.000000Z",
    "started_at": "2026-03-02T09:15:31.000000Z",
    "finished_at": None,
}
ESTIMATE_EXAMPLE: dict[str, Any] = {
    "case_runs": 64,
    "turns": 128,
    "tokens": 1173952,
    "cost_usd": "0.70437120",
    "billed_usd": "1.72974720",
    "fits": False,
    "basis": "adaptive: 812 tokens a turn, from 214 recent turns; deliberative: 17,531 tokens a "
    "turn, typical figures",
    "per_turn": {
        "adaptive": {"tokens": 812, "basis": "recent", "recent": 214},
        "deliberative": {"tokens": 17531, "basis": "typical", "recent": 0},
    },
    "budget": {
        "month": "2026-03-01",
        "monthly_tokens": 2000000,
        "used": 1200000,
        "held_by_runs_in_flight": 0,
        "left": 800000,
    },
}
RUN_DETAIL_EXAMPLE: dict[str, Any] = {
    **RUN_EXAMPLE,
    "status": "done",
    "progress": {"total": 64, "completed": 64, "percent": 100},
    "finished_at": "2026-03-02T09:17:02.000000Z",
    "estimate": {k: v for k, v in ESTIMATE_EXAMPLE.items() if k != "fits"} | {"fits": True},
    "baseline": {"mode": "standard", "model": "gpt-4o-mini", "evaluation": True},
    "candidate": {"mode": "deliberative", "rubric": "support", "model": "gpt-4o-mini"},
    "report": {
        "kind": "cases",
        "summary": {"fixed": 2, "broke": 1, "unchanged_pass": 28, "unchanged_fail": 1},
        "ratio": {"llm_calls_per_turn": 3.1, "tokens_per_turn": 2.7, "cost_per_turn": 2.8},
    },
}
CASE_RUN_EXAMPLE: dict[str, Any] = {
    "id": 412,
    "case": CASE_EXAMPLE["id"],
    "conversation": None,
    "case_name": "cancel-confirmed",
    "side": "candidate",
    "attempt": 1,
    "status": "failed",
    "passed": False,
    "judged_passed": True,
    "transcript": [
        {
            "index": 0,
            "customer": "Please cancel order TH-10042",
            "reply": "I can cancel TH-10042 for you — shall I go ahead?",
            "tools_ran": [],
            "tools_proposed": [{"name": "cancel_order", "params": {"order_id": "TH-10042"}}],
            "escalated": False,
            "llm_calls": 3,
        }
    ],
    "checks": [
        {
            "turn": 1,
            "expect": "tool_called",
            "spec": {"name": "cancel_order"},
            "passed": False,
            "detail": "cancel_order did not run",
        }
    ],
    "judged": [{"criterion": "does not promise a refund", "passed": True, "score": 92}],
    "llm_calls": 6,
    "prompt_tokens": 4210,
    "completion_tokens": 380,
    "cost_usd": "0.00085400",
    "duration_ms": 2310,
    "error": "",
    "finished_at": "2026-03-02T09:16:12.000000Z",
}

CASE_ID_PARAMETER = public_id_path_parameter("public_id", "The case's public id.")
RUN_ID_PARAMETER = public_id_path_parameter("public_id", "The run's public id.")


CASES = ResourceSchema(
    "simulation_cases",
    CASES_TAG,
    CASE_ID_PARAMETER,
    serializer=SimCaseSerializer,
    example=CASE_EXAMPLE,
    example_name="A case",
)
RUNS = ResourceSchema(
    "simulation_runs",
    RUNS_TAG,
    RUN_ID_PARAMETER,
    serializer=SimulationRunDetailSerializer,
    example=RUN_DETAIL_EXAMPLE,
    example_name="Finished",
)


def _case_or_404(client: Any, public_id: str) -> SimCase:
    return found_by_public_id(simcase_get, public_id, client=client)


def _run_or_404(client: Any, public_id: str) -> SimulationRun:
    return found_by_public_id(simulation_run_get, public_id, client=client)


def _case_body(request: Request, *, partial: bool) -> dict[str, Any]:
    """The request body as a case (its shape checked; the format is `case_validate`'s)."""
    body = SimCaseWriteSerializer(data=request.data, partial=partial)
    body.is_valid(raise_exception=True)
    return dict(request.data)


class SimCaseListCreateApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @CASES.list_page(
        "List test cases",
        "The client's simulation test cases by suite and name, one page at a time. "
        "Needs the viewer role.",
        parameters=[
            OpenApiParameter("suite", OpenApiTypes.STR, description="Only this suite's cases."),
            OpenApiParameter("tag", OpenApiTypes.STR, description="Only cases with this tag."),
            CLIENT_PARAMETER,
        ],
        invalid=invalid_example("suite", "Enter a valid slug."),
    )
    def get(self, request: Request) -> Response:
        filters = self.validated_query(SimCaseFilterSerializer)
        tag = filters.get("tag")
        queryset = simcase_list(
            client=self.client, suite=filters.get("suite"), tags=[tag] if tag else None
        )
        return self.paginated_response(queryset, SimCaseSerializer)

    @CASES.create(
        "Add a test case",
        "Adds a case in the case format (docs/simulations.md): customer messages "
        "(`turns`) or a simulated customer (`simulated`), expectations, judged criteria and tool "
        "stubs. Every error names its place, e.g. `turns[1].expect.tool_called`. The name must "
        "be new within the client. Needs the agent role.",
        request=SimCaseWriteSerializer,
        invalid=("turns[0].expect.escalated", "must be a boolean"),
        requests={"A case": CASE_WRITE_EXAMPLE},
    )
    def post(self, request: Request) -> Response:
        case = simcase_create(client=self.client, data=_case_body(request, partial=False))
        return Response(SimCaseSerializer(case).data, status=status.HTTP_201_CREATED)


class SimCaseDetailApi(StaffAPIView):
    required_roles = {"GET": READ, "PUT": SUPPORT, "PATCH": SUPPORT, "DELETE": SUPPORT}

    @CASES.retrieve("Read a test case", "One case. Needs the viewer role.")
    def get(self, request: Request, public_id: str) -> Response:
        return Response(SimCaseSerializer(_case_or_404(self.client, public_id)).data)

    @CASES.update(
        "Replace a test case",
        "Replaces the case with the body (keys left out take their defaults). "
        "Needs the agent role.",
        request=SimCaseWriteSerializer,
        partial=False,
        invalid=("name", "This field is required."),
        requests={"A case": CASE_WRITE_EXAMPLE},
        updated=CASE_EXAMPLE,
    )
    def put(self, request: Request, public_id: str) -> Response:
        case = _case_or_404(self.client, public_id)
        data = _case_body(request, partial=False)
        case = simcase_update(client=self.client, case=case, data=data)
        return Response(SimCaseSerializer(case).data)

    @CASES.update(
        "Change a test case",
        "Changes the given keys; the whole case is validated again. Needs the agent role.",
        request=SimCaseWriteSerializer(partial=True),
        invalid=("repeat", "must be at least 1"),
        requests={"Disable": {"enabled": False}},
        updated={**CASE_EXAMPLE, "enabled": False},
    )
    def patch(self, request: Request, public_id: str) -> Response:
        case = _case_or_404(self.client, public_id)
        data = _case_body(request, partial=True)
        case = simcase_update(client=self.client, case=case, data=data, partial=True)
        return Response(SimCaseSerializer(case).data)

    @CASES.destroy(
        "Delete a test case",
        "Deletes the case; past runs keep its results under its name. Needs the agent role.",
    )
    def delete(self, request: Request, public_id: str) -> Response:
        simcase_delete(client=self.client, case=_case_or_404(self.client, public_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class SimulationRunListCreateApi(StaffAPIView):
    required_roles = {"GET": READ, "POST": SUPPORT}

    @RUNS.list_page(
        "List simulation runs",
        "The client's simulation runs, newest first, with their progress. Needs the viewer role.",
        serializer=SimulationRunSerializer,
        example=RUN_EXAMPLE,
    )
    def get(self, request: Request) -> Response:
        return self.list_response(simulation_run_list, SimulationRunSerializer)

    @RUNS.create(
        "Start a simulation run",
        "Runs test cases (`kind: cases`, chosen by `selection`: suite, tags or "
        "case ids) or replays saved conversations (`kind: replay`: period, escalated only, with "
        "a tool call) in a sandbox — nothing reaches a customer and no tool webhook is called — "
        "against the live configuration (the baseline, unless `compare` is false) and a "
        "candidate with `overrides`. The run queues behind live turns on the workers; follow "
        "its `progress` on the run. Metered as `simulation` against the client's simulation "
        "budget, never the live one: a mode, model or loop setting the plan does not allow, an "
        "unpriced model, or a run whose estimate does not fit the budget answers 400; more "
        "than SIMULATION_RUNS_IN_FLIGHT_PER_CLIENT runs in flight answer 429. Needs the agent "
        "role.",
        request=SimulationRunCreateSerializer,
        invalid=("overrides.mode", "unknown mode 'fast'"),
        errors=(429,),
        requests={
            "Deliberative on the demo suite": {
                "name": "Deliberative?",
                "kind": "cases",
                "selection": {"suite": "demo"},
                "overrides": {"mode": "deliberative", "rubric": "support"},
                "compare": True,
            },
            "Last week's escalations replayed": {
                "kind": "replay",
                "selection": {"since": "2026-02-23", "escalated_only": True},
                "overrides": {"mode": "deliberative"},
            },
        },
        created={**RUN_EXAMPLE, "status": "queued", "report": {}},
        created_name="Started",
    )
    def post(self, request: Request) -> Response:
        data = validated_body(SimulationRunCreateSerializer, request)
        run = simulation_run_create(
            client=self.client,
            created_by=acting_user(request),
            source=RunSource.API,
            kind=data["kind"],
            selection=data["selection"],
            overrides=data["overrides"],
            compare=data["compare"],
            name=data.get("name", ""),
        )
        fresh = simulation_run_get(client=self.client, public_id=run.public_id)
        return Response(SimulationRunDetailSerializer(fresh).data, status=status.HTTP_201_CREATED)


class SimulationRunEstimateApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @RUNS.operation(
        "estimate",
        "Estimate a simulation run",
        "What a run with this body (the body of `POST /runs/`) would use — case "
        "runs, customer turns, expected tokens (turns × each side's expected tokens a turn of "
        "its mode: the client's average over its recent turns of that mode, or typical figures; "
        "plus a simulated customer's and the judge's calls), their basis and dollars — against "
        "the client's simulation budget for the month. Validated as a start is (a mode, "
        "model or loop setting the plan does not allow answers 400); nothing is started or "
        "saved. Needs the agent role.",
        member=False,
        request=SimulationRunCreateSerializer,
        responses=write_responses(
            200,
            SimulationEstimateSerializer,
            "overrides.mode",
            "the deliberative mode is not included in the plan; choose one of: standard, adaptive.",
        ),
        examples=[
            OpenApiExample(
                "Estimate",
                value=ESTIMATE_EXAMPLE,
                response_only=True,
            )
        ],
    )
    def post(self, request: Request) -> Response:
        data = validated_body(SimulationRunCreateSerializer, request)
        estimate = simulation_run_estimate(
            client=self.client,
            source=RunSource.API,
            kind=data["kind"],
            selection=data["selection"],
            overrides=data["overrides"],
            compare=data["compare"],
        )
        return Response(SimulationEstimateSerializer(estimate.as_dict()).data)


class SimulationRunDetailApi(StaffAPIView):
    required_roles = {"GET": READ}

    @RUNS.retrieve(
        "Read a simulation run",
        "The run with its progress, both configurations and — once finished — the "
        "side-by-side report (pass rates, each case's change, tool and escalation changes, "
        "calls, tokens and cost per turn and their ratio, latency p50/p95). Needs the viewer "
        "role.",
    )
    def get(self, request: Request, public_id: str) -> Response:
        return Response(SimulationRunDetailSerializer(_run_or_404(self.client, public_id)).data)


class SimulationRunStopApi(StaffAPIView):
    required_roles = {"POST": SUPPORT}

    @RUNS.action(
        "stop",
        "Stop a simulation run",
        "Case runs not yet started are not started; those running finish their "
        "current turn. Stopping a finished run changes nothing and answers 200 with it as it "
        "is. No request body. Needs the agent role.",
        answer={**RUN_DETAIL_EXAMPLE, "status": "stopped", "report": {}},
        answer_name="Stopped",
    )
    def post(self, request: Request, public_id: str) -> Response:
        run = _run_or_404(self.client, public_id)
        simulation_run_stop(client=self.client, run=run)
        fresh = simulation_run_get(client=self.client, public_id=run.public_id)
        return Response(SimulationRunDetailSerializer(fresh).data)


class CaseRunListApi(StaffAPIView):
    required_roles = {"GET": READ}

    @RUNS.operation(
        "cases",
        "List a run's case runs",
        "Each case (or replayed conversation) × side × attempt of the run, with its "
        "transcript (per turn: the customer's message, the replies, tools that ran, were "
        "proposed or refused, escalation, calls, tokens, cost, latency and the trace id), the "
        "code checks and — apart — the judged criteria. Needs the viewer role.",
        parameters=[
            RUN_ID_PARAMETER,
            choice_parameter("side", Side, "Only this side."),
            choice_parameter("status", CaseStatus, "Only case runs in this status."),
            CLIENT_PARAMETER,
        ],
        **page_schema(
            CaseRunSerializer,
            CASE_RUN_EXAMPLE,
            invalid=invalid_example("side", '"both" is not a valid choice.'),
        ),
    )
    def get(self, request: Request, public_id: str) -> Response:
        run = _run_or_404(self.client, public_id)
        filters = self.validated_query(CaseRunFilterSerializer)
        queryset = (
            CaseRun.objects.for_client(self.client)
            .filter(run=run, **filters)
            .select_related("case", "conversation")
            .order_by("case_name", "side", "attempt")
        )
        return self.paginated_response(queryset, CaseRunSerializer)
