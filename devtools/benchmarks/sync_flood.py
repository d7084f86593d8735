"""Sync flood: one tenant's 100 slow-sitemap knowledge sources against another tenant's replies
(docs/benchmarks.md, "Fairness").

It deploys what devtools/benchmarks/load.py deploys — the Procfile's `release`, `web` and `worker`
under production settings on PostgreSQL and Redis, with the local OpenAI-compatible model — plus
the Procfile's `background` process, and serves a slow web site from this process: a sitemap of
`--pages` pages, each answered after `--page-seconds`. Then:

1. baseline: `--probe-customers` customers of tenant B write `--messages` messages each;
2. flood: tenant A gets `--sources` sitemap sources of that site (`resync_hours: 1`) and all of
   them are queued for a sync at once (as "Sync now" on every one, or the beat); while they
   sync, tenant B's customers write again.

It reports B's reply p50/p95 in both phases, their ratio (the target: p95 ≤ 1.5× the
baseline), and how many of A's sources synced, waited or failed meanwhile.

    .venv/bin/python devtools/benchmarks/sync_flood.py \\
        --database-url postgres://postgres@127.0.0.1:5432/gd_lanes \\
        --redis-url redis://127.0.0.1:6379/11 --cache-url rediscache://127.0.0.1:6379/11
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

import load  # noqa: E402  (devtools/benchmarks/load.py: the deployment and the customers)

from tests.support import procfile  # noqa: E402


class SlowSite:
    """A sitemap of `pages` pages on 127.0.0.1, each page answered after `seconds`."""

    def __init__(self, pages: int, seconds: float) -> None:
        self.requests = 0
        site = self
        self.server: ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests += 1
                host = site.url("")
                if self.path.startswith("/sitemap"):
                    urls = "".join(f"<url><loc>{host}/p/{n}</loc></url>" for n in range(pages))
                    body = (
                        '<?xml version="1.0"?><urlset '
                        'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                        f"{urls}</urlset>"
                    ).encode()
                    kind = "application/xml"
                else:
                    time.sleep(seconds)
                    body = (
                        f"<html><head><title>Page {self.path}</title></head><body><main>"
                        f"<p>Slow page {self.path}: shipping takes three days.</p></main>"
                        "</body></html>"
                    ).encode()
                    kind = "text/html; charset=utf-8"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


def flood_sources(slug: str, base: str, count: int) -> None:
    """(Runs as `sync_flood.py _flood` inside the deployment's settings.) Give tenant `slug`
    `count` sitemap sources of `base` and queue a sync of every one at once."""
    import django

    django.setup()
    from django.db import transaction

    from apps.clients.models import Client
    from apps.knowledge.models import KnowledgeSource
    from apps.knowledge.services.sync import source_sync_start

    client = Client.objects.get(slug=slug)
    for n in range(count):
        source = KnowledgeSource.objects.create(
            client=client,
            name=f"slow sitemap {n}",
            kind="sitemap",
            url=f"{base}/sitemap-{n}.xml",
            resync_hours=1,
        )
        with transaction.atomic():
            source_sync_start(source=source)
    sys.stdout.write(json.dumps({"queued": count}))


def source_states(slug: str) -> None:
    """(Runs as `sync_flood.py _states`.) Tenant `slug`'s sources by status."""
    import django

    django.setup()
    from django.db.models import Count

    from apps.knowledge.models import KnowledgeSource

    rows = (
        KnowledgeSource.objects.unscoped("the benchmark counts its own sources")
        .filter(client__slug=slug)
        .values("status")
        .annotate(n=Count("pk"))
    )
    sys.stdout.write(json.dumps({row["status"]: row["n"] for row in rows}))


def _helper(env: dict[str, str], *argv: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 (our own script)
        [sys.executable, str(Path(__file__)), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout))


async def probe(args: argparse.Namespace, deployment: Any, key: str) -> load.Stats:
    import httpx

    stats = load.Stats()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        await asyncio.gather(
            *(
                load.customer(
                    http,
                    deployment.base,
                    key,
                    stats,
                    messages=args.messages,
                    think=args.think,
                    reply_timeout=args.reply_timeout,
                    start_delay=n * args.think / max(args.probe_customers, 1),
                )
                for n in range(args.probe_customers)
            )
        )
    return stats


def _summary(stats: load.Stats) -> dict[str, Any]:
    return {
        "turns": stats.turns,
        "reply_p50_s": round(load.pct(stats.reply, 50), 3),
        "reply_p95_s": round(load.pct(stats.reply, 95), 3),
        "errors": len(stats.errors),
        "unanswered": stats.unanswered,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_flood":
        flood_sources(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_states":
        source_states(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--cache-url", required=True)
    parser.add_argument("--latency", type=float, default=0.5, help="model seconds per call")
    parser.add_argument("--worker-threads", type=int, default=100)
    parser.add_argument("--worker-processes", type=int, default=1)
    parser.add_argument("--sources", type=int, default=100)
    parser.add_argument("--pages", type=int, default=50, help="pages per sitemap")
    parser.add_argument("--page-seconds", type=float, default=5.0)
    parser.add_argument("--probe-customers", type=int, default=10)
    parser.add_argument("--messages", type=int, default=3)
    parser.add_argument("--think", type=float, default=2.0)
    parser.add_argument("--reply-timeout", type=float, default=300.0)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds the flood runs first")
    args = parser.parse_args()
    # load.deploy's own switches: two tenants (A floods, B is probed), customers' scenario
    args.tenants, args.scenario, args.replies = 2, "customers", 0
    args.first_token = args.token_seconds = 0.0
    args.no_stream_replies, args.web_processes = False, 2
    site = SlowSite(args.pages, args.page_seconds)
    deployment = load.deploy(args)
    # the slow site is on 127.0.0.1: the syncs may fetch it (nothing else differs)
    env = {**deployment.env, "KNOWLEDGE_FETCH_ALLOW_PRIVATE_NETWORKS": "True"}
    background = procfile.start("background", env, deployment.logs / "background.log")
    try:
        time.sleep(5)
        key_b = deployment.keys[1]
        asyncio.run(probe(argparse.Namespace(**{**vars(args), "messages": 1}), deployment, key_b))
        baseline = asyncio.run(probe(args, deployment, key_b))
        _helper(env, "_flood", "load-0", site.url(""), str(args.sources))
        time.sleep(args.settle)
        flooded = asyncio.run(probe(args, deployment, key_b))
        states = _helper(env, "_states", "load-0")
        ratio = load.pct(flooded.reply, 95) / max(load.pct(baseline.reply, 95), 1e-9)
        result = {
            "scenario": f"{args.sources} sitemap sources of tenant A ({args.pages} pages, "
            f"{args.page_seconds:g} s each) queued at once; {args.probe_customers} customers of "
            f"tenant B × {args.messages} msgs, think {args.think:g} s, model {args.latency:g} s",
            "baseline": _summary(baseline),
            "during_flood": _summary(flooded),
            "p95_ratio": round(ratio, 2),
            "site_requests": site.requests,
            "tenant_a_sources": states,
            "load_after": load.loadavg(),
        }
        sys.stdout.write(json.dumps(result) + "\n")
    finally:
        procfile.stop(background)
        load.undeploy(deployment)
        site.server.shutdown()
    sys.stderr.write(f"logs: {deployment.logs}\n")


if __name__ == "__main__":
    main()
