"""The bare baseline agent: a plain OpenAI tool-calling loop, no GuideDesk.

System prompt = the retail policy, tools = the eight tools' JSON Schemas, each tool call
executed against the run's retail server through its MCP endpoint (the server GuideDesk's own
executors call). No gates: whatever the model calls runs, whatever it writes reaches the
customer. The model sits behind the injecting proxy (`InjectingProxy`); with the offline model
the upstream is the naive rule-based agent (`apps.certify.naive`).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, cast

import openai
from django.conf import settings

from apps.certify.customer import ScriptedCustomer
from apps.certify.proxy import InjectingProxy
from apps.certify.retail.server import POLICY_FILE, RetailServer
from apps.certify.retail.tools import TOOLS
from apps.certify.session import Session
from apps.tools.mcp_client import McpError, mcp_call_tool

MAX_STEPS = 8  # model calls per customer message
TIMEOUT = 60.0  # a tool call through MCP


def openai_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in TOOLS.values()
    ]


def _execute(server: RetailServer, name: str, arguments: str) -> dict[str, Any]:
    """One tool call through MCP, answered as the tool message's JSON."""
    try:
        params = json.loads(arguments or "{}")
    except ValueError as exc:
        return {"ok": False, "error": f"The arguments are not valid JSON: {exc}"}
    if not isinstance(params, dict):
        return {"ok": False, "error": "The arguments must be a JSON object."}
    try:
        outcome = mcp_call_tool(
            url=server.mcp_url,
            headers={"Authorization": f"Bearer {server.token}"},
            name=name,
            arguments=params,
            timeout=TIMEOUT,
        )
    except McpError as exc:
        return {"ok": False, "error": str(exc)}
    if outcome.is_error:
        return {"ok": False, "error": json.dumps(outcome.result)}
    return {"ok": True, "result": outcome.result}


def run_bare(
    *,
    session: Session,
    server: RetailServer,
    proxy: InjectingProxy,
    customer: ScriptedCustomer,
    model: str,
    api_key: str | None,
) -> None:
    """The whole conversation, recorded in `session`."""
    with openai.OpenAI(
        base_url=proxy.base_url,
        api_key=api_key or "offline",
        max_retries=0,
        timeout=settings.LLM_TIMEOUT,  # the same bound per call as GuideDesk's
    ) as client:
        _converse(session, server, proxy, customer, client, model)


def _converse(
    session: Session,
    server: RetailServer,
    proxy: InjectingProxy,
    customer: ScriptedCustomer,
    client: openai.OpenAI,
    model: str,
) -> None:
    tools = openai_tools()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": POLICY_FILE.read_text(encoding="utf-8")}
    ]
    text = customer.opening()
    for index in range(session.max_turns):
        session.customer(index, text)
        messages.append({"role": "user", "content": text})
        visible: list[str] = []
        for _ in range(MAX_STEPS):
            seen = len(proxy.injections)
            try:
                completion = client.chat.completions.create(
                    model=model,
                    messages=cast(Any, messages),
                    tools=cast(Any, tools),
                    temperature=0,
                    max_tokens=settings.LLM_MAX_COMPLETION_TOKENS,
                )
            except openai.APIError as exc:
                # The model failed (a timeout, an error answer): a bare agent has no fallback,
                # so the conversation ends here, unanswered. The agent failed, not the harness.
                session.injected(index, proxy.injections[seen:])
                session.agent(index, "\n".join(visible))
                failure = f"the model failed: {type(exc).__name__}: {exc}"[:500]
                session.transcript.append({"role": "note", "text": failure, "turn": index})
                return
            session.injected(index, proxy.injections[seen:])
            usage = completion.usage
            cached = 0
            if usage is not None and usage.prompt_tokens_details is not None:
                cached = usage.prompt_tokens_details.cached_tokens or 0
            session.llm_call(
                prompt=usage.prompt_tokens if usage else 0,
                completion=usage.completion_tokens if usage else 0,
                cached=cached,
            )
            message = completion.choices[0].message
            if message.tool_calls:
                calls: list[dict[str, Any]] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in message.tool_calls
                    if c.type == "function"
                ]
                messages.append(
                    {"role": "assistant", "content": message.content, "tool_calls": calls}
                )
                for call in calls:
                    name = call["function"]["name"]
                    reply = session.executed(
                        index,
                        name,
                        call["function"]["arguments"],
                        partial(_execute, server, name, call["function"]["arguments"]),
                    )
                    if name == "transfer_to_human_agents" and reply.get("ok"):
                        session.handed_off = True
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": json.dumps(reply, sort_keys=True),
                        }
                    )
                continue
            content = message.content or ""
            messages.append({"role": "assistant", "content": content})
            if content:
                visible.append(content)
            break
        next_text = session.answered(index, visible, customer)
        if next_text is None:
            return
        text = next_text
