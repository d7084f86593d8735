"""The playground's server-sent events: a run's steps as they are recorded, its state (status,
progress, calls, tokens, cost) when it changes, and `end` once it has finished and every step is
out. The same events replay a stored run (no LLM call), paced so it can be watched.

Live streams wake on Redis pub/sub (`guidedesk:playground:<run id>`, published by the recorder)
when REDIS_URL is set, and poll the run's stored steps otherwise (the demo needs no Redis)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from apps.clients.models import Client
from apps.conversations import events
from apps.platform import sse as sse_stream
from apps.platform.db import release_connection
from apps.platform.sse import sse_event as sse
from apps.playground.selectors import run_json, run_state, steps_after
from apps.playground.services import CHANNEL_PREFIX
from apps.reasoning.rendering import step_json

logger = logging.getLogger(__name__)

RETRY_MS = 1000
POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0
STREAM_SECONDS = 120.0  # then the browser reconnects (Last-Event-ID = the last step's index)
REPLAY_STEP_SECONDS = 0.4


@dataclass
class RunCursor:
    """What one stream has told its browser so far."""

    sent_index: int = -1
    state: dict[str, Any] = field(default_factory=dict)
    ended: bool = False

    def poll(self, *, client: Client, run_id: int) -> list[str] | None:
        """The events since the last poll; None when the run is gone."""
        run = run_state(client=client, run_id=run_id)  # before the steps: a finished run's
        if run is None:  # steps are all stored by the time it reads finished
            return None
        chunks: list[str] = []
        for step in steps_after(client=client, run_id=run_id, after=self.sent_index):
            chunks.append(sse("step", step_json(step), event_id=step.index))
            self.sent_index = step.index
        state = run_json(run)
        if state != self.state:
            chunks.append(sse("run", state))
            self.state = state
        if run.finished and not self.ended:
            chunks.append(sse("end", {"status": run.status}))
            self.ended = True
        return chunks


def run_stream(*, client: Client, run_id: int, after: int) -> Iterator[str]:
    """The live stream for a WSGI server (and the test server): polls the stored steps."""
    cursor = RunCursor(sent_index=after)
    return sse_stream.poll_stream(
        lambda: cursor.poll(client=client, run_id=run_id),
        name="playground stream",
        retry_ms=RETRY_MS,
        poll_seconds=POLL_SECONDS,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        stream_seconds=STREAM_SECONDS,
        finished=lambda: cursor.ended,
    )


async def run_stream_async(*, client: Client, run_id: int, after: int) -> AsyncIterator[str]:
    """The live stream served from the event loop (ASGI): sleeps until the recorder publishes a
    change of this run (Redis), or polls without Redis; holds no thread or connection between
    reads. It re-reads at least every 5 s: a publish lost with a Redis hiccup costs a short
    delay, never a stuck page."""
    cursor = RunCursor(sent_index=after)
    stream = sse_stream.push_stream(
        lambda: cursor.poll(client=client, run_id=run_id),
        name="playground stream",
        hub=events.hub(prefix=CHANNEL_PREFIX),
        wake_id=run_id,
        retry_ms=RETRY_MS,
        poll_seconds=POLL_SECONDS,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        stream_seconds=STREAM_SECONDS,
        finished=lambda: cursor.ended,
        recheck_seconds=5.0,
    )
    async with aclosing(stream):  # a client that goes away closes the loop's `finally` at once
        async for chunk in stream:
            yield chunk


def _replay_events(client: Client, run_id: int) -> list[tuple[str, Any, int | None]] | None:
    run = run_state(client=client, run_id=run_id)
    if run is None:
        return None
    steps = steps_after(client=client, run_id=run_id, after=-1, limit=10_000)
    state = run_json(run)
    replayed: list[tuple[str, Any, int | None]] = []
    calls = prompt = completion = 0
    progress = {"step": 0, "max_steps": 0}
    running = {**state, "status": "replaying", "llm_calls": 0, "tokens": 0, "final": None}
    replayed.append(("run", {**running, "prompt_tokens": 0, "completion_tokens": 0}, None))
    for step in steps:
        replayed.append(("step", step_json(step), step.index))
        if step.prompt_tokens or step.completion_tokens:
            calls += 1
            prompt += step.prompt_tokens
            completion += step.completion_tokens
        output = step.output or {}
        if step.name == "reason_step" and output.get("max_steps"):
            progress = {"step": output.get("step") or 0, "max_steps": output["max_steps"]}
        replayed.append(
            (
                "run",
                {
                    **running,
                    "llm_calls": calls,
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "tokens": prompt + completion,
                    "progress": progress,
                },
                None,
            )
        )
    replayed.append(("run", {**state, "replay": True}, None))
    replayed.append(("end", {"status": run.status, "replay": True}, None))
    return replayed


def replay_stream(*, client: Client, run_id: int) -> Iterator[str]:
    """A stored run played back from its trace, one step at a time: no LLM call, no write."""
    yield f"retry: {RETRY_MS}\n\n"
    replayed = _replay_events(client, run_id)
    release_connection(without_pool=True)
    for event, data, event_id in replayed or []:
        yield sse(event, data, event_id)
        if event == "step":
            time.sleep(REPLAY_STEP_SECONDS)


async def replay_stream_async(*, client: Client, run_id: int) -> AsyncIterator[str]:
    yield f"retry: {RETRY_MS}\n\n"
    replayed = await sync_to_async(_replay_events, thread_sensitive=False)(client, run_id)
    await sync_to_async(release_connection, thread_sensitive=False)(without_pool=True)
    for event, data, event_id in replayed or []:
        yield sse(event, data, event_id)
        if event == "step":
            await asyncio.sleep(REPLAY_STEP_SECONDS)
