"""Tests for the fake LLM and webhook servers (no Django needed)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from devtools.fake_llm import (
    Delay,
    Fail,
    FakeLLMServer,
    NoUsage,
    RecordedRequest,
    WithUsage,
    count_tokens,
)

from .fake_webhook import FakeWebhookServer, Reply, WebhookRequest, sign, verify_signature

MODEL = "gpt-test-mini"


def schema_format(step: str) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": step, "schema": {"type": "object"}, "strict": False},
    }


def ask(
    client: openai.OpenAI,
    *,
    step: str | None = None,
    header_step: str | None = None,
    json_object: bool = False,
    messages: list[dict[str, str]] | None = None,
    timeout: float | None = None,
) -> Any:
    kwargs: dict[str, Any] = {}
    if step is not None:
        kwargs["response_format"] = schema_format(step)
    elif json_object:
        kwargs["response_format"] = {"type": "json_object"}
    if header_step is not None:
        kwargs["extra_headers"] = {"X-GuideDesk-Step": header_step}
    if timeout is not None:
        kwargs["timeout"] = timeout
    return client.chat.completions.create(
        model=MODEL,
        messages=messages or [{"role": "user", "content": "hello"}],
        **kwargs,
    )


# --------------------------------------------------------------------------------------------
# FakeLLMServer
# --------------------------------------------------------------------------------------------


def test_base_url_ends_in_v1(llm: FakeLLMServer) -> None:
    assert llm.base_url == f"http://127.0.0.1:{llm.port}/v1"


def test_scripted_dict_reply_is_parsed_by_the_sdk(
    llm: FakeLLMServer, client: openai.OpenAI
) -> None:
    llm.script("respond", {"answer": "Bonjour", "citations": [1, 2]})

    completion = ask(client, step="respond")

    assert completion.id.startswith("chatcmpl-")
    assert completion.model == MODEL
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.role == "assistant"
    assert json.loads(completion.choices[0].message.content) == {
        "answer": "Bonjour",
        "citations": [1, 2],
    }
    assert llm.pending() == 0


def test_string_reply_is_returned_verbatim(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    fenced = '```json\n{"score": 2,}\n```\n<assessment>ok</assessment>'
    llm.script("assess", fenced)

    completion = ask(client, step="assess")

    assert completion.choices[0].message.content == fenced


def test_replies_are_fifo_per_step_then_default(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("respond", {"n": 1}, {"n": 2})
    llm.script("assess", {"step": "assess"})
    llm.default("respond", {"n": "default"})

    contents = [json.loads(ask(client, step="respond").choices[0].message.content)["n"]]
    contents.append(json.loads(ask(client, step="assess").choices[0].message.content)["step"])
    contents += [
        json.loads(ask(client, step="respond").choices[0].message.content)["n"] for _ in range(3)
    ]

    assert contents == [1, "assess", 2, "default", "default"]


def test_step_routing_by_schema_name(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("respond", "respond-reply")
    llm.script("critique", "critique-reply")

    assert ask(client, step="critique").choices[0].message.content == "critique-reply"
    assert ask(client, step="respond").choices[0].message.content == "respond-reply"
    assert [r.step for r in llm.requests] == ["critique", "respond"]
    assert llm.calls("critique")[0].json_schema == {"type": "object"}


def test_step_routing_by_header(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("compose", '{"draft": "json_object mode"}')
    llm.script("assess", "plain text mode")
    llm.script("critique", "header wins over schema name")
    llm.script("unknown", "no step at all")

    json_mode = ask(client, header_step="compose", json_object=True)
    text_mode = ask(client, header_step="assess")
    both = ask(client, step="respond", header_step="critique")
    neither = ask(client)

    assert json_mode.choices[0].message.content == '{"draft": "json_object mode"}'
    assert text_mode.choices[0].message.content == "plain text mode"
    assert both.choices[0].message.content == "header wins over schema name"
    assert neither.choices[0].message.content == "no step at all"
    assert llm.calls("compose")[0].headers["x-guidedesk-step"] == "compose"
    assert llm.calls("respond") == []


def test_usage_is_counted_from_what_was_sent(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    system = "You are GuideDesk, a museum guide assistant. " * 7
    user = "Quels sont les horaires d'ouverture ?"
    reply = {"answer": "De 9h à 18h.", "confidence": 0.9}
    llm.script("respond", reply)

    completion = ask(
        client,
        step="respond",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
    )

    content = completion.choices[0].message.content
    expected_prompt = count_tokens(system) + count_tokens(user) + 2 * 4
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == expected_prompt
    assert completion.usage.completion_tokens == count_tokens(content)
    assert completion.usage.total_tokens == expected_prompt + count_tokens(content)
    recorded = llm.calls("respond")[0]
    assert recorded.messages[0]["content"] == system
    assert recorded.prompt_text == f"{system}\n{user}"


def test_count_tokens_rule() -> None:
    assert count_tokens("") == 1
    assert count_tokens("abcd") == 1
    assert count_tokens("abcde") == 2
    assert count_tokens("x" * 400) == 100


def test_usage_can_be_overridden_or_omitted(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script(
        "respond",
        WithUsage({"a": 1}, prompt_tokens=1000, completion_tokens=7),
        WithUsage("partial", completion_tokens=3),
        NoUsage({"a": 2}),
    )

    overridden = ask(client, step="respond")
    partial = ask(client, step="respond")
    omitted = ask(client, step="respond")

    assert overridden.usage is not None
    assert (overridden.usage.prompt_tokens, overridden.usage.completion_tokens) == (1000, 7)
    assert overridden.usage.total_tokens == 1007
    assert partial.usage is not None
    assert partial.usage.prompt_tokens == count_tokens("hello") + 4
    assert partial.usage.completion_tokens == 3
    assert omitted.usage is None
    assert json.loads(omitted.choices[0].message.content) == {"a": 2}


def test_fail_429_raises_rate_limit_error(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("respond", Fail(status=429, retry_after=7), {"after": "retry"})

    with pytest.raises(openai.RateLimitError) as excinfo:
        ask(client, step="respond")

    assert excinfo.value.status_code == 429
    assert excinfo.value.response.headers["retry-after"] == "7"
    assert excinfo.value.code == "rate_limit_exceeded"
    assert json.loads(ask(client, step="respond").choices[0].message.content) == {"after": "retry"}


def test_fail_500_raises_internal_server_error(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("assess", Fail(status=500, message="upstream exploded"))
    llm.script("compose", Fail(status=503, body="<html>bad gateway</html>"))

    with pytest.raises(openai.InternalServerError) as excinfo:
        ask(client, step="assess")
    with pytest.raises(openai.InternalServerError) as excinfo_html:
        ask(client, step="compose")

    assert excinfo.value.status_code == 500
    assert "upstream exploded" in excinfo.value.message
    assert excinfo_html.value.status_code == 503
    assert excinfo_html.value.response.text == "<html>bad gateway</html>"


def test_delay_beyond_timeout_raises_api_timeout_error(
    llm: FakeLLMServer, client: openai.OpenAI
) -> None:
    llm.script("respond", Delay(1.0, then={"late": True}), {"on_time": True})

    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(client, step="respond", timeout=0.2)
    assert time.monotonic() - started < 0.9

    # The server is not wedged by the abandoned request.
    assert json.loads(ask(client, step="respond").choices[0].message.content) == {"on_time": True}


def test_delay_within_timeout_still_answers(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("respond", Delay(0.05, then="slow but fine"))

    assert ask(client, step="respond", timeout=1).choices[0].message.content == "slow but fine"


def test_missing_script_gives_500(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as excinfo:
        ask(client, step="critique")

    assert excinfo.value.status_code == 500
    assert "no scripted reply for step 'critique'" in excinfo.value.message
    assert [r.step for r in llm.requests] == ["critique"]


def test_callable_reply_and_fallback(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    def echo_last_message(request: RecordedRequest) -> dict[str, Any]:
        return {"echo": request.messages[-1]["content"], "step": request.step}

    def fallback(request: RecordedRequest) -> str | None:
        return f"fallback for {request.step}" if request.step != "assess" else None

    llm.script("respond", echo_last_message)
    llm.fallback(fallback)

    echoed = ask(client, step="respond", messages=[{"role": "user", "content": "ping"}])
    assert json.loads(echoed.choices[0].message.content) == {"echo": "ping", "step": "respond"}
    assert ask(client, step="compose").choices[0].message.content == "fallback for compose"
    with pytest.raises(openai.InternalServerError):
        ask(client, step="assess")


def test_callable_that_raises_fails_loudly(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    def broken(request: RecordedRequest) -> str:
        raise KeyError("oops")

    llm.script("respond", broken)

    with pytest.raises(openai.InternalServerError) as excinfo:
        ask(client, step="respond")
    assert "KeyError" in excinfo.value.message


def test_models_endpoint(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [llm.model]


def test_requests_are_recorded_and_reset(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.script("respond", "a", "unused")
    llm.default("assess", "b")
    ask(client, step="respond")

    recorded = llm.requests[0]
    assert recorded.body["model"] == MODEL
    assert recorded.model == MODEL
    assert all(key == key.lower() for key in recorded.headers)
    assert recorded.headers["content-type"] == "application/json"

    llm.reset()
    assert llm.requests == []
    assert llm.pending() == 0
    with pytest.raises(openai.InternalServerError):
        ask(client, step="assess")


def test_latency_applies_to_every_reply(client: openai.OpenAI, llm: FakeLLMServer) -> None:
    with FakeLLMServer(latency=0.1) as slow:
        slow.default("respond", "x")
        sdk = openai.OpenAI(api_key="test", base_url=slow.base_url, max_retries=0, timeout=2)
        try:
            started = time.monotonic()
            ask(sdk, step="respond")
            ask(sdk, step="respond")
            assert time.monotonic() - started >= 0.2
        finally:
            sdk.close()


def test_stop_interrupts_pending_delay() -> None:
    server = FakeLLMServer().start()
    server.script("respond", Delay(30, then="never"))
    sdk = openai.OpenAI(api_key="test", base_url=server.base_url, max_retries=0, timeout=5)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(sdk, step="respond")
        except openai.APIError as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 2
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)

    started = time.monotonic()
    server.stop()
    caller.join(timeout=3)
    sdk.close()

    assert time.monotonic() - started < 2
    assert not caller.is_alive()
    assert len(errors) == 1
    assert isinstance(errors[0], openai.APIConnectionError)


# --------------------------------------------------------------------------------------------
# FakeWebhookServer
# --------------------------------------------------------------------------------------------

SECRET = "s3cret"


@pytest.fixture
def hook() -> Iterator[FakeWebhookServer]:
    with FakeWebhookServer() as server:
        yield server


@pytest.fixture
def dedupe_hook() -> Iterator[FakeWebhookServer]:
    with FakeWebhookServer(dedupe=True) as server:
        yield server


def call_tool(
    url: str,
    *,
    params: dict[str, Any] | None = None,
    key: str = "key-1",
    secret: str = SECRET,
    timeout: float = 2,
) -> tuple[int, Any]:
    payload = {
        "tool": "book_tour",
        "params": params if params is not None else {"date": "2025-06-01"},
        "conversation_id": "conv-1",
        "idempotency_key": key,
    }
    body = json.dumps(payload).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            "X-GuideDesk-Signature": sign(body, secret),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read() or b"null")


def test_default_reply_echoes_params(hook: FakeWebhookServer) -> None:
    status, body = call_tool(hook.url(), params={"seats": 3})

    assert (status, body) == (200, {"ok": True, "result": {"echo": {"seats": 3}}})
    request = hook.requests[0]
    assert request.path == "/hook"
    assert request.tool == "book_tour"
    assert request.conversation_id == "conv-1"
    assert request.idempotency_key == "key-1"
    assert request.json["idempotency_key"] == "key-1"


def test_signature_verification(hook: FakeWebhookServer) -> None:
    call_tool(hook.url(), secret=SECRET)
    call_tool(hook.url(), secret="wrong-secret")

    good, bad = hook.requests
    assert verify_signature(good, SECRET)
    assert hook.verify_signature(good, SECRET.encode())
    assert not verify_signature(good, "other-secret")
    assert not verify_signature(bad, SECRET)

    tampered = WebhookRequest(
        method=good.method,
        path=good.path,
        query=good.query,
        headers=good.headers,
        raw_body=good.raw_body.replace(b"conv-1", b"conv-2"),
        json=None,
    )
    unsigned = WebhookRequest("POST", "/hook", "", {}, good.raw_body, None)
    assert not verify_signature(tampered, SECRET)
    assert not verify_signature(unsigned, SECRET)


def test_scripted_500_then_200(hook: FakeWebhookServer) -> None:
    hook.script(
        Reply(status=500, json={"ok": False, "error": "database down"}),
        Reply(status=200, json={"ok": True, "result": {"booking_id": 42}}),
    )

    first = call_tool(hook.url())
    second = call_tool(hook.url())
    third = call_tool(hook.url(), params={"x": 1})

    assert first == (500, {"ok": False, "error": "database down"})
    assert second == (200, {"ok": True, "result": {"booking_id": 42}})
    assert third == (200, {"ok": True, "result": {"echo": {"x": 1}}})
    assert hook.executed_count == 3


def test_callable_reply_default_and_helpers(hook: FakeWebhookServer) -> None:
    def by_tool(request: WebhookRequest) -> Reply:
        return Reply.ok({"tool": request.tool, "seats": request.params["seats"]})

    hook.script(Reply.fail("no seats left"), by_tool)
    hook.default(Reply.fail("maintenance", status=503))

    assert call_tool(hook.url("/tools/book")) == (200, {"ok": False, "error": "no seats left"})
    assert call_tool(hook.url(), params={"seats": 2}) == (
        200,
        {"ok": True, "result": {"tool": "book_tour", "seats": 2}},
    )
    assert call_tool(hook.url()) == (503, {"ok": False, "error": "maintenance"})
    assert [r.path for r in hook.requests] == ["/tools/book", "/hook", "/hook"]


def test_reply_delay_can_time_out_the_client(hook: FakeWebhookServer) -> None:
    hook.script(Reply.ok({"late": True}, delay=1.0))

    with pytest.raises(TimeoutError):
        call_tool(hook.url(), timeout=0.2)


def test_without_dedupe_every_request_executes(hook: FakeWebhookServer) -> None:
    hook.script(Reply.ok({"n": 1}), Reply.ok({"n": 2}))

    assert call_tool(hook.url(), key="same")[1]["result"] == {"n": 1}
    assert call_tool(hook.url(), key="same")[1]["result"] == {"n": 2}
    assert hook.executed_count == 2


def test_dedupe_replays_successful_response(dedupe_hook: FakeWebhookServer) -> None:
    dedupe_hook.script(Reply.ok({"booking_id": 1}), Reply.ok({"booking_id": 2}))

    first = call_tool(dedupe_hook.url(), key="k1")
    replay = call_tool(dedupe_hook.url(), key="k1")
    other = call_tool(dedupe_hook.url(), key="k2")

    assert first == replay == (200, {"ok": True, "result": {"booking_id": 1}})
    assert other == (200, {"ok": True, "result": {"booking_id": 2}})
    assert dedupe_hook.executed_count == 2
    assert len(dedupe_hook.requests) == 3
    assert [r.replayed for r in dedupe_hook.requests] == [False, True, False]


def test_dedupe_retries_after_failure_then_replays(dedupe_hook: FakeWebhookServer) -> None:
    dedupe_hook.script(Reply.fail("transient", status=500), Reply.ok({"booking_id": 9}))

    assert call_tool(dedupe_hook.url(), key="k1")[0] == 500
    assert call_tool(dedupe_hook.url(), key="k1") == (
        200,
        {"ok": True, "result": {"booking_id": 9}},
    )
    assert call_tool(dedupe_hook.url(), key="k1") == (
        200,
        {"ok": True, "result": {"booking_id": 9}},
    )
    assert dedupe_hook.executed_count == 2


def test_dedupe_rejects_key_reuse_with_different_payload(dedupe_hook: FakeWebhookServer) -> None:
    call_tool(dedupe_hook.url(), key="k1", params={"seats": 1})
    status, body = call_tool(dedupe_hook.url(), key="k1", params={"seats": 5})

    assert status == 422
    assert body["ok"] is False
    assert dedupe_hook.executed_count == 1


def test_dedupe_serialises_concurrent_duplicates(dedupe_hook: FakeWebhookServer) -> None:
    dedupe_hook.script(Reply.ok({"booking_id": 1}, delay=0.2), Reply.ok({"booking_id": 2}))
    results: list[tuple[int, Any]] = []

    def worker() -> None:
        results.append(call_tool(dedupe_hook.url(), key="k1"))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=3)

    assert results == [(200, {"ok": True, "result": {"booking_id": 1}})] * 3
    assert dedupe_hook.executed_count == 1
