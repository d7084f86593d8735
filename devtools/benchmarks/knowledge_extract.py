"""What reading a document in a child process costs, and what it saves (docs/benchmarks.md).

- A small PDF (3 pages) and a small HTML page: read in this process (the reader called
  directly) and through the child (`apps.knowledge.sandbox.read_in_child`, default limits);
  the median of --runs each. A bare `python -c pass` start is timed too.
- The PDF bomb of tests/support/pdf_bomb.py (500 pages sharing one stream of 32,000 `Tj`
  operators, ≈ 80 KB): through the child with the default limits (the time until it is
  stopped, the child's CPU, this thread's CPU), and in this process for --bomb-pages pages
  (the whole file would take minutes), extrapolated to 500.

Run from the project root:

    .venv/bin/python devtools/benchmarks/knowledge_extract.py [--runs 10] [--bomb-pages 5]

No database is used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

HTML = (
    b"<html><head><title>Opening hours</title></head><body><nav>Home | Shop</nav><main>"
    + b"<p>The shop is open Monday to Friday from nine to five, Saturdays ten to two.</p>" * 40
    + b"</main><footer>Copyright</footer></body></html>"
)


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def say(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--bomb-pages", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from django.conf import settings

    from apps.knowledge import extract_child, sandbox
    from tests.support.fake_site import pdf_bytes
    from tests.support.pdf_bomb import bomb_pdf

    pdf = pdf_bytes("Warranty", "Every tent has a two year warranty.", "Keep it.", "Thanks.")
    extract_child.read("pdf", pdf)  # imports warm in this process, as in a worker
    extract_child.read("html", HTML)

    bare = median_seconds(
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.runs
    )
    rows = [("`python -c pass` (interpreter start)", "—", f"{bare * 1000:.0f} ms", "—")]
    for kind, data in (("pdf", pdf), ("html", HTML)):
        inline = median_seconds(lambda k=kind, d=data: extract_child.read(k, d), args.runs)
        cpu: list[float] = []

        def in_child(k: str = kind, d: bytes = data, cpu: list[float] = cpu) -> None:
            run = sandbox.ChildRun()
            sandbox.read_in_child(k, d, run=run)
            cpu.append(run.cpu_seconds)

        child = median_seconds(in_child, args.runs)
        label = f"small {kind.upper()} ({len(data) // 1024 or 1} KB)"
        rows.append(
            (
                label,
                f"{inline * 1000:.0f} ms",
                f"{child * 1000:.0f} ms",
                f"{statistics.median(cpu) * 1000:.0f} ms",
            )
        )

    say(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    say(f"median of {args.runs} runs\n")
    say("| document | in this process | in the child, start included | the child's CPU |")
    say("|---|---:|---:|---:|")
    for row in rows:
        say("| " + " | ".join(row) + " |")

    bomb = bomb_pdf(pages=500)
    run = sandbox.ChildRun()
    thread_cpu, started = time.thread_time(), time.perf_counter()
    try:
        sandbox.read_in_child("pdf", bomb, run=run)
        outcome = "read (unexpected)"
    except sandbox.ReaderError as exc:
        outcome = str(exc)
    wall, thread_cpu = time.perf_counter() - started, time.thread_time() - thread_cpu

    partial = bomb_pdf(pages=args.bomb_pages)
    inline_cpu = time.process_time()
    extract_child.read("pdf", partial)
    inline_cpu = time.process_time() - inline_cpu
    per_page = inline_cpu / args.bomb_pages

    limit = int(settings.KNOWLEDGE_EXTRACT_CPU_SECONDS)
    say(f"\nPDF bomb, {len(bomb) // 1024} KB, 500 pages; child limit {limit} CPU s\n")
    say("| where | wall | CPU | outcome |")
    say("|---|---:|---:|---|")
    say(
        f"| child (default limits) | {wall:.1f} s | child {run.cpu_seconds:.1f} s, "
        f"calling thread {thread_cpu * 1000:.0f} ms | {outcome} |"
    )
    say(
        f"| this process, {args.bomb_pages} pages | — | {inline_cpu:.1f} s "
        f"({per_page:.2f} s a page) | ≈ {per_page * 500 / 60:.0f} min of CPU for all 500 |"
    )


if __name__ == "__main__":
    main()
