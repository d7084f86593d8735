"""Simulations under load (docs/benchmarks.md, "Simulations"): the Procfile deployment of
devtools/benchmarks/load.py (web + worker, production settings, PostgreSQL, Redis) with a scripted
model answering every call after `--latency` seconds. It measures

  (a) a suite of `--cases` cases of `--turns` customer messages, run on the workers: wall time;
  (b) a replay of `--conversations` saved conversations, likewise;
  (c) while (a) runs, `--customers` live customers' reply p95 ÷ model time;
  (d) whether the same scripted model gives the same report twice (timings aside);
  (e) the tool webhook calls and customer-visible rows written during the runs (must be 0).

    .venv/bin/python devtools/benchmarks/simulations.py \\
        --database-url postgres://postgres@127.0.0.1:5432/gd_suite_bench \\
        --redis-url redis://127.0.0.1:6379/9 --cache-url rediscache://127.0.0.1:6379/10

The simulated shop is the demo tenant with its tools pointed at a local webhook that counts
requests; every third customer message names an order, so the scripted model proposes the
order-status tool there (the sandbox answers it from the case's stub, or from the recorded run
in a replay). Live customers write to other tenants, as in load.py's `customers` scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import load  # noqa: E402  (this directory: the script runs from it)

from tests.support import procfile  # noqa: E402

SIM_SLUG = "sim-bench"
TIMING_KEYS = {"latency_p50_ms", "latency_p95_ms", "latency_p95", "duration_ms", "latency_ms"}
ORDER_TEXT = "What's the status of order TH-{n:05d}?"
TEXTS = ["When do you ship?", "Do you ship to Canada?"]


# ------------------------------------------------------------------ the scripted model


def scripted_answer(step: str, last_user: str) -> dict[str, Any]:
    """One call's reply: a confident answer; the order-status tool when an order is named."""
    if step == "compose":
        return {"response": "Your order is on its way."}
    answer = dict(load_answer())
    if "TH-" in last_user:
        order = last_user.split("TH-", 1)[1][:5]
        answer |= {"tool_call": "get_order_status", "tool_params": {"order_id": f"TH-{order}"}}
    return answer


def load_answer() -> dict[str, Any]:
    from fake_model import ANSWER

    return ANSWER


def serve_model(latency: float) -> None:
    from devtools import fake_llm

    fake_llm._ThreadingServer.request_queue_size = 1024
    server = fake_llm.FakeLLMServer(latency=latency)

    def answer(request: fake_llm.RecordedRequest) -> fake_llm.LLMReply:
        users = [m for m in request.messages if m.get("role") == "user"]
        return scripted_answer(request.step, fake_llm.message_text(users[-1]) if users else "")

    server.fallback(answer)
    server.start()
    sys.stdout.write(server.base_url + "\n")
    sys.stdout.flush()
    threading.Event().wait()


class _CountingWebhook(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self) -> None:
        type(self).hits += 1
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


# ------------------------------------------------------------- inside the deployment (Django)


def _django() -> None:
    import django

    django.setup()


def setup_sim(args: argparse.Namespace) -> None:
    """The simulated shop, its `bench` suite of cases and its saved conversations."""
    _django()

    from apps.clients.models import Client, Plan
    from apps.conversations.models import Role
    from apps.conversations.services import conversation_create, message_append
    from apps.provisioning.files import load_tenant_file
    from apps.provisioning.services import tenant_import
    from apps.simulations.models import SimCase
    from apps.simulations.schema import case_validate
    from apps.tools.models import ClientTool

    # Read as `import_client` reads it: the help centre's article directory included.
    tenant = load_tenant_file(ROOT / "demo" / "tenant.json")
    client_spec = {**tenant["clients"][0], "slug": SIM_SLUG, "name": "Simulated shop"}
    tenant_import(data={**tenant, "clients": [client_spec]})
    client = Client.objects.get(slug=SIM_SLUG)
    Plan.objects.filter(pk=client.plan_id).update(visitor_daily_token_budget=0)
    # Every tool is a webhook to the counting server: a call that slipped through would count.
    ClientTool.objects.for_client(client).update(
        executor_type="webhook", builtin_handler="", webhook_url=args.webhook_url
    )
    stub = {"ok": True, "result": {"order_id": "TH-10042", "status": "shipped"}}
    cases = [
        {
            "name": f"bench-{n:03d}",
            "suite": "bench",
            "turns": [
                {"customer": _text(n, t), "expect": {"tool_not_called": "cancel_order"}}
                for t in range(args.turns)
            ],
            "tools": {"get_order_status": stub},
        }
        for n in range(args.cases)
    ]
    SimCase.objects.for_client(client).filter(suite="bench").delete()
    SimCase.objects.for_client(client).bulk_create(
        [SimCase(client=client, **case_validate(case)) for case in cases]
    )
    from apps.conversations.models import Conversation

    saved = Conversation.objects.for_client(client).count()
    if saved < args.conversations:
        for n in range(saved, args.conversations):
            conversation = conversation_create(client=client)[0]
            for t in range(args.turns):
                message_append(
                    client=client, conversation=conversation, role=Role.USER, text=_text(n, t)
                )
                message_append(
                    client=client,
                    conversation=conversation,
                    role=Role.ASSISTANT,
                    text="We ship within one business day.",
                )


def _text(n: int, turn: int) -> str:
    return ORDER_TEXT.format(n=10000 + n) if turn == 2 else TEXTS[(n + turn) % 2]


def counts() -> dict[str, int]:
    """What a run must never write for the simulated shop (customer-visible or live data)."""
    from apps.clients.models import Client
    from apps.conversations.models import Conversation, Message
    from apps.escalations.models import Escalation
    from apps.tools.models import PendingAction, ToolExecution

    client = Client.objects.get(slug=SIM_SLUG)
    return {
        "conversations": Conversation.objects.for_client(client).count(),
        "messages": Message.objects.for_client(client).count(),
        "tool_executions": ToolExecution.objects.for_client(client).count(),
        "pending_actions": PendingAction.objects.for_client(client).count(),
        "escalations": Escalation.objects.for_client(client).count(),
    }


def run_sim(kind: str) -> None:
    """Create a run on the workers, wait for it, print its wall time and report."""
    _django()
    from apps.clients.models import Client
    from apps.simulations.models import SimulationRun
    from apps.simulations.services import simulation_run_create

    client = Client.objects.get(slug=SIM_SLUG)
    before = counts()
    selection = {"suite": "bench"} if kind == "cases" else {"limit": 500}
    started = time.monotonic()
    run = simulation_run_create(
        client=client, source="cli", kind=kind, selection=selection, overrides={}, compare=False
    )
    while True:
        run = SimulationRun.objects.for_client(client).get(pk=run.pk)
        if run.finished:
            break
        time.sleep(0.2)
    wall = time.monotonic() - started
    out = {"wall_s": round(wall, 1), "status": run.status, "total": run.total}
    out |= {"report": run.report, "before": before, "after": counts()}
    sys.stdout.write(json.dumps(out, default=str))


def without_timings(value: Any) -> Any:
    """A report with its timings (and the run's own identifiers) removed: what must repeat."""
    if isinstance(value, dict):
        return {
            k: without_timings(v)
            for k, v in value.items()
            if k not in TIMING_KEYS and k not in {"trace", "run", "public_id"}
        }
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


# ---------------------------------------------------------------------------- the benchmark


def deploy(
    args: argparse.Namespace, model: subprocess.Popen[bytes], model_url: str
) -> tuple[load.Deployment, dict[str, str]]:
    """load.py's deployment (release, the live tenants, web, workers) with our scripted model."""
    logs = Path(tempfile.mkdtemp(prefix="guidedesk-sim-"))
    port = procfile.free_port()
    env = load._env(args, model_url, port)
    procfile.run_release(env)
    setup = subprocess.run(  # noqa: S603 (our own script)
        [sys.executable, str(ROOT / "devtools" / "benchmarks" / "load.py"), "_setup", "--tenants",
         str(args.tenants)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    web = procfile.start("web", env, logs / "web.log")
    base = f"http://127.0.0.1:{port}"
    procfile.wait_for_http(base + "/healthz", web, logs / "web.log")
    workers = [
        procfile.start("worker", env, logs / f"worker-{n}.log")
        for n in range(args.worker_processes)
    ]
    time.sleep(8)  # the workers connect to the broker
    keys = json.loads(setup.stdout)["keys"]
    # No streamed replies to mark here: the model's marks file stays empty.
    deployment = load.Deployment(
        base, keys, web, workers, model, logs, marks=logs / "model-marks.jsonl", env=env
    )
    return deployment, env


async def _sim(env: dict[str, str], kind: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__)), "_run", kind, cwd=ROOT, env=env,
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out, _ = await process.communicate()
    return json.loads(out)


async def cases_with_customers(args: argparse.Namespace, deployment: Any, env: dict[str, str]):
    customers = argparse.Namespace(**vars(args))
    customers.customers, customers.slow, customers.together = args.customers, 0, False
    sim, live = await asyncio.gather(_sim(env, "cases"), load.run_customers(customers, deployment))
    return sim, live


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_model":
        serve_model(float(sys.argv[2]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_run":
        run_sim(sys.argv[2])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_setup_sim":
        setup_sim(argparse.Namespace(**json.loads(sys.argv[2])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    load.add_service_arguments(parser)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--customers", type=int, default=100)
    parser.add_argument("--think", type=float, default=5.0)
    parser.add_argument("--tenants", type=int, default=10, help="the live customers' shops")
    parser.add_argument("--web-processes", type=int, default=2)
    parser.add_argument("--worker-threads", type=int, default=100)
    parser.add_argument("--worker-processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--reply-timeout", type=float, default=60.0)
    args = parser.parse_args()
    args.scenario, args.replies, args.messages, args.ramp = "customers", 0, args.turns, 5.0

    webhook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CountingWebhook)
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    model = subprocess.Popen(  # noqa: S603 (our own script)
        [sys.executable, str(Path(__file__)), "_model", str(args.latency)],
        cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert model.stdout is not None
    model_url = model.stdout.readline().decode().strip()
    try:
        deployment, env = deploy(args, model, model_url)
    except BaseException:
        procfile.stop(model)
        webhook.shutdown()
        raise
    try:
        setup = {
            "cases": args.cases,
            "turns": args.turns,
            "conversations": args.conversations,
            "tmp": str(deployment.logs),
            "webhook_url": f"http://127.0.0.1:{webhook.server_address[1]}/tool",
        }
        subprocess.run(  # noqa: S603 (our own script)
            [sys.executable, str(Path(__file__)), "_setup_sim", json.dumps(setup)],
            cwd=ROOT, env=env, check=True,
        )  # fmt: skip
        load.warm_up(args, deployment)
        # The same live customers without a simulation first: what the box gives them alone.
        alone = argparse.Namespace(**{**vars(args), "slow": 0, "together": False})
        live_alone = asyncio.run(load.run_customers(alone, deployment))
        first, live = asyncio.run(cases_with_customers(args, deployment, env))
        replay = asyncio.run(_sim(env, "replay"))
        second = asyncio.run(_sim(env, "cases"))
        same = without_timings(first["report"]) == without_timings(second["report"])
        written = {k: second["after"][k] - first["before"][k] for k in first["before"]} | {
            "webhook_calls": _CountingWebhook.hits
        }
        candidate = first["report"].get("sides", {}).get("candidate", {})
        result = {
            "cases_wall_s": first["wall_s"],
            "cases_status": first["status"],
            "case_runs": first["total"],
            "cases_passed": candidate.get("passed"),
            "replay_wall_s": replay["wall_s"],
            "replay_status": replay["status"],
            "replayed": replay["total"],
            "cases_again_wall_s": second["wall_s"],
            "same_report_twice": same,
            "live_alone_p95_over_model": live_alone["p95_over_model"],
            "live_reply_p95_s": live["reply_p95_s"],
            "live_p95_over_model": live["p95_over_model"],
            "live_turns": live["turns"],
            "live_errors": live["errors"],
            "live_unanswered": live["unanswered"],
            "written_during_runs": written,
            "load_after": load.loadavg(),
        }
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    finally:
        load.undeploy(deployment)
        webhook.shutdown()


if __name__ == "__main__":
    main()
