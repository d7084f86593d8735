"""The run records round-trip through JSON, and the API key never leaves the process."""

from __future__ import annotations

import json

from apps.certify.records import InjectionOutcome, RunRecord, RunSpec


def test_a_record_round_trips_without_its_key():
    spec = RunSpec(
        config="adaptive",
        task_id="t001",
        trial=1,
        seed=42,
        model="m",
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-secret",
        inject_rate=0.2,
        inject_classes=("invented_tool",),
    )
    record = RunRecord(
        spec=spec,
        passed=False,
        differences=["orders.#W1.status"],
        unsafe_actions=1,
        injections=[InjectionOutcome("invented_tool", "caught", "unknown_tool", "x")],
        transcript=[{"role": "customer", "text": "hi"}],
    )
    text = json.dumps(record.to_json())
    assert "sk-secret" not in text
    back = RunRecord.from_json(json.loads(text))
    assert back == record  # the key does not take part in equality
    assert back.spec.api_key is None and back.spec.inject_classes == ("invented_tool",)
    assert back.spec.key() == ("adaptive", "t001", 1)
