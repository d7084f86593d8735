"""`manage.py certify` with a stand-in runner (the real one is apps/certify/run.py): the plan it
runs, the cost guard and --yes, runs.jsonl written run by run, --resume skipping the runs done
and refusing another plan, the progress output, and bad input refused with a clear message."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.certify.management.commands import certify
from apps.certify.records import InjectionOutcome, RunRecord, RunSpec
from apps.certify.report import numbers_bytes

pytestmark = pytest.mark.django_db  # the command checks that the database is migrated

BASE = ["--model", "offline", "--configs", "bare,adaptive", "--k", "2", "--task-limit", "3"]


class FakeRunner:
    """Deterministic runs: bare fails trial 1 of every task; one injection a run."""

    def __init__(self, cost: float = 0.0) -> None:
        self.calls: list[RunSpec] = []
        self.cost = cost
        self.fail_on: Callable[[int, RunSpec], BaseException | None] = lambda n, spec: None

    def run_one(self, spec: RunSpec) -> RunRecord:
        self.calls.append(spec)
        failure = self.fail_on(len(self.calls), spec)
        if failure is not None:
            raise failure
        return RunRecord(
            spec=spec,
            passed=not (spec.config == "bare" and spec.trial == 1),
            prompt_tokens=100,
            completion_tokens=10,
            cost_usd=0.001,
            latency_s=0.1 * len(self.calls),  # never the same twice
            injections=[
                InjectionOutcome(
                    "wrong_params",
                    "caught" if spec.config == "adaptive" else "reached_back_office",
                    "confirmation" if spec.config == "adaptive" else None,
                )
            ],
        )

    def estimate(self, spec: RunSpec) -> float:
        return self.cost


@pytest.fixture
def runner(monkeypatch) -> FakeRunner:
    fake = FakeRunner()
    monkeypatch.setattr(certify, "load_runner", lambda: (fake.run_one, fake.estimate))
    return fake


def certify_cmd(out: Path, *args: str) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("certify", *args, "--out", str(out), stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def run_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]


def test_runs_the_plan_and_writes_the_report(runner, tmp_path):
    stdout, _ = certify_cmd(tmp_path, *BASE, "--inject", "0.2")
    keys = [spec.key() for spec in runner.calls]
    assert len(keys) == 12 == len(set(keys))  # 2 configurations × 3 tasks × 2 trials
    assert keys == sorted(keys, key=lambda k: (["bare", "adaptive"].index(k[0]), k[1], k[2]))
    assert {spec.inject_rate for spec in runner.calls} == {0.2}
    assert [line["spec"]["task_id"] for line in run_lines(tmp_path)] == [k[1] for k in keys]
    report = json.loads((tmp_path / "certificate.json").read_text())
    assert report["results"]["bare"]["pass_hat_k"] == {"1": 0.5, "2": 0.0}
    assert report["results"]["adaptive"]["pass_hat_k"] == {"1": 1.0, "2": 1.0}
    assert report["results"]["adaptive"]["injections"]["wrong_params"]["guards"] == {
        "confirmation": 6
    }
    assert (tmp_path / "certificate.html").read_text().startswith("<!doctype html>")
    assert "12 runs; 0 done, 12 to run. Estimated cost: at most $0.00" in stdout
    assert "bare: 3/6 passed, pass^1=0.500 pass^2=0.000" in stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["k"] == 2 and plan["model"] == "offline" and "api_key" not in plan


def test_progress_lines_when_not_a_terminal(runner, tmp_path):
    _, stderr = certify_cmd(tmp_path, *BASE)
    lines = stderr.splitlines()
    assert len(lines) == 12
    assert lines[0].startswith(f"[1/12] bare {runner.calls[0].task_id} trial 0: passed")
    assert lines[1].startswith(f"[2/12] bare {runner.calls[1].task_id} trial 1: failed")
    assert all("elapsed 0:00:" in line and "ETA " in line for line in lines)
    assert "\r" not in stderr


def test_progress_bar_on_a_terminal():
    ticks = iter([0.0, 0.0, 10.0, 10.0, 20.0, 20.0])
    stream = io.StringIO()
    progress = certify.Progress(stream, total=4, done=2, tty=True, clock=lambda: next(ticks))
    spec = RunSpec("bare", "retail-001", 0, 42, "offline", None)
    progress.start(spec)
    progress.finish(spec, RunRecord(spec=spec, passed=True, cost_usd=0.5, latency_s=10.0))
    progress.start(spec)
    progress.close()
    text = stream.getvalue()
    assert text.count("\r\x1b[K") == 3 and text.endswith("\n")
    assert "############------------ [3/4] bare retail-001 trial 0 elapsed 0:00:00 ETA ?" in text
    assert (
        "[3/4] bare retail-001 trial 0: passed in 10.0s, elapsed 0:00:10 ETA 0:00:10 $0.5000"
        in text
    )
    assert "##################------ [4/4]" in text


def test_refuses_past_the_cost_estimate_unless_told(runner, tmp_path):
    runner.cost = 1.0
    out = tmp_path / "out"
    with pytest.raises(CommandError) as refused:
        certify_cmd(out, *BASE, "--max-cost", "5")
    assert refused.value.returncode == certify.REFUSED
    assert "estimated cost $12.00 is over --max-cost $5.00" in str(refused.value)
    assert "--yes" in str(refused.value)
    assert runner.calls == [] and not out.exists()

    stdout, _ = certify_cmd(out, *BASE, "--max-cost", "5", "--yes")
    assert "Estimated cost: at most $12.00" in stdout
    assert len(runner.calls) == 12


def test_resume_skips_the_runs_done(runner, tmp_path):
    runner.fail_on = lambda n, spec: KeyboardInterrupt() if n == 5 else None
    with pytest.raises(CommandError) as stopped:
        certify_cmd(tmp_path, *BASE)
    assert stopped.value.returncode == certify.INTERRUPTED
    assert "4 of 12 runs" in str(stopped.value) and "--resume" in str(stopped.value)
    assert len(run_lines(tmp_path)) == 4 and not (tmp_path / "certificate.json").exists()

    with pytest.raises(CommandError) as exists:
        certify_cmd(tmp_path, *BASE)
    assert exists.value.returncode == certify.USAGE and "--resume" in str(exists.value)

    first_four = [spec.key() for spec in runner.calls[:4]]
    runner.calls.clear()
    runner.fail_on = lambda n, spec: None
    stdout, _ = certify_cmd(tmp_path, *BASE, "--resume")
    assert "4 done, 8 to run" in stdout
    assert len(runner.calls) == 8 and not {s.key() for s in runner.calls} & set(first_four)
    assert len(run_lines(tmp_path)) == 12
    report = json.loads((tmp_path / "certificate.json").read_text())
    assert report["complete"] is True and report["results"]["bare"]["runs"] == 6

    runner.calls.clear()
    stdout, _ = certify_cmd(tmp_path, *BASE, "--resume")  # all done: the report again
    assert runner.calls == [] and "12 done, 0 to run" in stdout


def test_resume_refuses_another_plan(runner, tmp_path):
    certify_cmd(tmp_path, *BASE)
    for change, expected in [
        (["--k", "3"], "k: 2 -> 3"),
        (["--seed", "7"], "seed: 42 -> 7"),
        (["--inject", "0.2"], "inject_rate: 0.0 -> 0.2"),
        (["--configs", "bare"], "configs"),
    ]:
        args = [*BASE, *change, "--resume"]
        with pytest.raises(CommandError) as refused:
            certify_cmd(tmp_path, *args)
        assert refused.value.returncode == certify.REFUSED
        assert expected in str(refused.value)
    assert len(runner.calls) == 12


def test_overwrite_starts_again(runner, tmp_path):
    certify_cmd(tmp_path, *BASE)
    certify_cmd(tmp_path, *BASE, "--overwrite")
    assert len(runner.calls) == 24 and len(run_lines(tmp_path)) == 12


def test_a_torn_last_line_is_run_again(runner, tmp_path):
    runner.fail_on = lambda n, spec: KeyboardInterrupt() if n == 4 else None
    with pytest.raises(CommandError):
        certify_cmd(tmp_path, *BASE)
    with (tmp_path / "runs.jsonl").open("a") as stream:
        stream.write('{"spec": {"config": "bare", "task_')  # the crash mid-write
    runner.calls.clear()
    runner.fail_on = lambda n, spec: None
    certify_cmd(tmp_path, *BASE, "--resume")
    assert len(runner.calls) == 9 and len(run_lines(tmp_path)) == 12


def test_a_harness_error_is_recorded_reported_and_run_again(runner, tmp_path):
    runner.fail_on = lambda n, spec: RuntimeError("server down") if n == 2 else None
    with pytest.raises(CommandError) as failed:
        certify_cmd(tmp_path, *BASE)
    assert failed.value.returncode == certify.FAILED and "1 runs failed" in str(failed.value)
    report = json.loads((tmp_path / "certificate.json").read_text())
    assert report["results"]["bare"]["errors"] == 1
    assert "RuntimeError: server down" in (tmp_path / "certificate.html").read_text()

    broken = runner.calls[1].key()
    runner.calls.clear()
    runner.fail_on = lambda n, spec: None
    certify_cmd(tmp_path, *BASE, "--resume")
    assert [spec.key() for spec in runner.calls] == [broken]
    report = json.loads((tmp_path / "certificate.json").read_text())
    assert report["results"]["bare"]["errors"] == 0


def test_same_seed_same_numbers(runner, tmp_path):
    certify_cmd(tmp_path / "one", *BASE, "--inject", "0.2")
    certify_cmd(tmp_path / "two", *BASE, "--inject", "0.2")
    one = json.loads((tmp_path / "one" / "certificate.json").read_text())
    two = json.loads((tmp_path / "two" / "certificate.json").read_text())
    assert one["timings"] != two["timings"]  # the stand-in's latencies differ
    assert numbers_bytes(one) == numbers_bytes(two)


def test_a_hosted_model_gets_its_key_and_never_writes_it(runner, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    hosted = ["--model", "gpt-x", "--configs", "bare", "--k", "1", "--tasks", "retail-001"]
    with pytest.raises(CommandError) as no_key:
        certify_cmd(tmp_path, *hosted)
    assert no_key.value.returncode == certify.USAGE and "OPENAI_API_KEY" in str(no_key.value)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-secret")
    certify_cmd(tmp_path, *hosted, "--base-url", "http://127.0.0.1:9/v1")
    spec = runner.calls[0]
    assert (spec.api_key, spec.base_url, spec.model) == (
        "sk-from-env-secret",
        "http://127.0.0.1:9/v1",
        "gpt-x",
    )
    for path in tmp_path.iterdir():
        assert "sk-from-env-secret" not in path.read_text(), path.name

    certify_cmd(tmp_path / "openai", *hosted)  # no endpoint named: OpenAI's, with the key
    assert runner.calls[-1].base_url == certify.OPENAI_URL


def test_default_out_is_named_after_model_and_seed(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stdout = io.StringIO()
    call_command(
        "certify", "--model", "org/My Model", "--base-url", "http://127.0.0.1:9/v1",
        "--configs", "bare", "--k", "1", "--tasks", "retail-001", "--seed", "7",
        stdout=stdout, stderr=io.StringIO(),
    )  # fmt: skip
    assert (tmp_path / "certificate-org-My-Model-7" / "certificate.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--configs", "bare,turbo"], "Unknown configuration 'turbo': choose from bare, standard"),
        (["--configs", ","], "Unknown configuration (none)"),
        (["--k", "0"], "--k must be at least 1"),
        (["--inject", "1.5"], "--inject must be between 0 and 1"),
        (["--inject", "-0.1"], "--inject must be between 0 and 1"),
        (["--inject-classes", "wrong_params,typo"], "Unknown error class 'typo'"),
        (["--tasks", "retail-001,retail-999"], "Unknown task 'retail-999'"),
        (["--task-limit", "0"], "--task-limit must be at least 1"),
        (["--max-turns", "0"], "--max-turns must be at least 1"),
        (["--max-cost", "-1"], "--max-cost cannot be negative"),
    ],
)
def test_bad_input_is_refused_clearly(runner, tmp_path, args, message):
    with pytest.raises(CommandError) as bad:
        certify_cmd(tmp_path / "out", "--model", "offline", *args)
    assert bad.value.returncode == certify.USAGE
    assert message in str(bad.value)
    assert runner.calls == [] and not (tmp_path / "out").exists()


def test_tasks_and_task_limit_exclude_each_other(runner, tmp_path):
    with pytest.raises(CommandError, match="not allowed with argument"):
        certify_cmd(tmp_path, "--model", "offline", "--tasks", "retail-001", "--task-limit", "2")


def test_a_missing_runner_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(certify, "RUNNER", "apps.certify.no_such_runner")
    with pytest.raises(CommandError) as missing:
        certify_cmd(tmp_path, *BASE)
    assert missing.value.returncode == certify.FAILED
    assert "apps/certify/run.py" in str(missing.value)


def test_an_unmigrated_database_is_named_before_any_run(runner, tmp_path, monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("x", False)])
    with pytest.raises(CommandError) as unmigrated:
        certify_cmd(tmp_path / "out", *BASE)
    assert unmigrated.value.returncode == certify.USAGE
    assert "manage.py migrate" in str(unmigrated.value)
    assert runner.calls == [] and not (tmp_path / "out").exists()
