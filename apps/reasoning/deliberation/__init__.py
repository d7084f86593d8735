"""Deliberative mode's machinery (the mode itself is `apps/reasoning/modes/deliberative.py`):

* `config`      — the rubric and MIN / MAX / TARGET / refinement settings a turn runs with;
* `termination` — the seed's termination rule, a pure function;
* `loop`        — the server-controlled loop: reason_step → feedback → … (dharma-feedback-loop);
* `refinement`  — Draft / Critique / FinalSpec events, failures as values (iterative-refinement);
* `telemetry`   — one structured `reasoning_step` log event per step.
"""
