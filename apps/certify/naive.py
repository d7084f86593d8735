"""The bare baseline's offline model: a small, deterministic, rule-based agent behind an
OpenAI-compatible endpoint (`POST /v1/chat/completions`, tool calling, not streamed).

It decides from the conversation it is sent, like a naive agent: it finds the account by the
e-mail the customer gave, looks up the orders the customer names, works out the action asked
for (cancel, modify, return, exchange, address, gift card balance, a human) from the
customer's words and the looked-up order, puts it to the customer, calls the tool on a "yes"
and reports the tool's result. It knows nothing of the tasks: no answer is written per task.
It does not check that an order belongs to the customer (a naive agent's mistake).

The same rules also answer GuideDesk's JSON step protocol (`step_answer`: docs/llm-protocol.md),
so offline both columns of the certificate share one brain: `assess`/`respond`/`synthesize`
get the decision in the step's fields, `critique` proceeds only with the call the agent would
make itself now (a state-changing one only after the customer's "yes"), `compose` reports a
tool result as the tool-calling agent does. The conversation is given in OpenAI's shape.

    with NaiveAgentServer() as server:
        openai.OpenAI(base_url=server.base_url, api_key="offline")

Plain Python, no Django.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self, cast

from apps.platform.local_server import LOCALHOST, ServerThread, Serving

NAIVE_MODEL = "naive-offline"
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ORDER_ID = re.compile(r"#W\d{7}")
YES = re.compile(r"^\s*(yes|yep|sure|ok|okay|please do|go ahead)\b", re.IGNORECASE)
NO = re.compile(r"^\s*(no|nope|don't|do not)\b", re.IGNORECASE)
ADDRESS = re.compile(
    r"address to (?P<a1>[^,]+), (?:(?P<a2>(?:Apt|Unit|Suite) [^,]+), )?(?P<city>[^,]+), "
    r"(?P<state>[A-Z]{2}) (?P<zip>\d{5})"
)
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
ACTION_WORDS = ("cancel", "return", "exchange", "change", "address", "balance", "human", "person")
KEPT = re.compile(r"keep the [A-Za-z ]+?(?= and |[,.;]|$)", re.IGNORECASE)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class Conversation:
    """What the agent reads from the messages it is sent."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.user_texts = [str(m.get("content") or "") for m in messages if m["role"] == "user"]
        self.last_user = self.user_texts[-1] if self.user_texts else ""
        self.user: dict[str, Any] | None = None
        self.orders: dict[str, dict[str, Any]] = {}
        self.tried_emails: list[str] = []
        self.last_tool: tuple[str, dict[str, Any], dict[str, Any]] | None = None
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        for m in messages:
            for call in m.get("tool_calls") or []:
                try:
                    args = json.loads(call["function"].get("arguments") or "{}")
                except ValueError:
                    args = {}
                calls[call.get("id") or ""] = (call["function"]["name"], args)
            if m["role"] == "tool":
                name, args = calls.get(m.get("tool_call_id") or "", ("", {}))
                try:
                    reply = json.loads(m.get("content") or "{}")
                except ValueError:
                    reply = {"ok": False, "error": str(m.get("content"))}
                if not isinstance(reply, dict):
                    reply = {"ok": False, "error": str(reply)}
                self._read(name, args, reply)
        # The last message is a tool result: its reply is what to report.
        self.after_tool = bool(messages) and messages[-1]["role"] == "tool"

    def _read(self, name: str, args: dict[str, Any], reply: dict[str, Any]) -> None:
        self.last_tool = (name, args, reply)
        ok = reply.get("ok", "error" not in reply and "code" not in reply)
        result = reply.get("result", reply) if ok else None
        if name == "get_user_details":
            if "email" in args:
                self.tried_emails.append(str(args["email"]).lower())
            if ok and isinstance(result, dict):
                self.user = result
        elif name == "get_order_details" and ok and isinstance(result, dict):
            self.orders[result.get("order_id", "")] = result
        elif ok and isinstance(result, dict) and result.get("order_id"):
            self.orders[result["order_id"]] = result


def _call(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _method(user: dict[str, Any], text: str, default: str = "") -> str:
    """The payment method the customer names (a card by its last four digits, PayPal, a
    gift card), else `default`."""
    low = text.lower()
    methods = user.get("payment_methods") or []
    for m in methods:
        if m.get("last_four") and m["last_four"] in text:
            return str(m["payment_method_id"])
    for source, word in (("paypal", "paypal"), ("gift_card", "gift card")):
        if word in low:
            for m in methods:
                if m.get("source") == source:
                    return str(m["payment_method_id"])
    return default


def _named_items(order: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """The order's items whose product the customer names."""
    low = KEPT.sub("", text).lower()  # "I keep the Tent and return …"
    return [i for i in order.get("items", []) if str(i["name"]).lower() in low]


def _new_variant(item: dict[str, Any], text: str) -> str | None:
    """The other in-stock variant of `item` whose options the customer names after it."""
    low = text.lower()
    at = low.find(str(item["name"]).lower())
    tail = low[at:] if at >= 0 else low
    close = tail.find(")")
    wanted = tail[close + 1 :] if close >= 0 else tail
    best, score = None, 0
    for v in item.get("variants", []):
        if v["item_id"] == item["item_id"] or not v.get("available"):
            continue
        hits = sum(1 for k, val in v["options"].items() if f"{k} {val}".lower() in wanted)
        if hits > score:
            best, score = v["item_id"], hits
    return best


class NaiveAgent:
    """The rules; `decide(messages)` answers one chat completion."""

    def decide(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        conv = Conversation(messages)
        n = len(messages)
        if conv.after_tool and conv.last_tool is not None:
            name, _args, reply = conv.last_tool
            looked_up = name in ("get_user_details", "get_order_details") and reply.get("ok")
            if not looked_up:
                return self._report(conv)
        if conv.user is None:
            emails = [e.lower() for t in conv.user_texts for e in EMAIL.findall(t)]
            fresh = [e for e in emails if e not in conv.tried_emails]
            if fresh:
                return _call("get_user_details", {"email": fresh[-1]}, n)
            return _say("To help you I first need your account: what is your e-mail address?")
        # An order the customer names that has not been looked up yet.
        for oid in ORDER_ID.findall(self._request_text(conv)):
            if oid not in conv.orders:
                return _call("get_order_details", {"order_id": oid}, n)
        action = self._action(conv)
        if isinstance(action, str):
            return _say(action)
        name, args, summary = action
        if name == "transfer_to_human_agents":
            return _call(name, args, n)
        if YES.match(conv.last_user) and self._proposed(conv) == summary:
            return _call(name, args, n)
        return _say(f"{summary} Shall I go ahead? Please confirm (yes/no).")

    def _proposed(self, conv: Conversation) -> str:
        for m in reversed(conv.messages):
            if m["role"] == "assistant" and isinstance(m.get("content"), str):
                return str(m["content"]).split(" Shall I go ahead?")[0]
        return ""

    def _request_text(self, conv: Conversation) -> str:
        """The customer's current request: their last message that asks for something, with
        what they said after it (a reason, a payment method, a yes)."""
        texts = conv.user_texts
        for index in range(len(texts) - 1, -1, -1):
            if any(word in texts[index].lower() for word in ACTION_WORDS):
                return " ".join(texts[index:])
        return conv.last_user

    def _action(self, conv: Conversation) -> tuple[str, dict[str, Any], str] | str:
        assert conv.user is not None
        if NO.match(conv.last_user) and len(conv.last_user.split()) <= 6:
            return "All right, I won't do that. Is there anything else?"
        text = self._request_text(conv)
        low = text.lower()
        ids = ORDER_ID.findall(text) or list(conv.orders)[-1:]
        order = conv.orders.get(ids[-1]) if ids else None
        if "human" in low or "person" in low:
            return ("transfer_to_human_agents", {"summary": text[:300]}, "")
        if "balance" in low:
            cards = [
                m for m in conv.user.get("payment_methods", []) if m.get("source") == "gift_card"
            ]
            if cards:
                return f"Your gift card balance is {cards[0]['balance']}."
            return "You have no gift card on your account."
        match = ADDRESS.search(text)
        if match:
            args = {
                "user_id": conv.user["user_id"],
                "address1": match["a1"],
                "address2": match["a2"] or "",
                "city": match["city"],
                "state": match["state"],
                "country": "USA",
                "zip": match["zip"],
            }
            where = f"{match['a1']}, {match['city']}, {match['state']} {match['zip']}"
            return ("modify_user_address", args, f"I'll change your address to {where}.")
        if order is None:
            return "Which order is this about? Please give me the order id."
        oid = order["order_id"]
        if "cancel" in low:
            reason = next((r for r in CANCEL_REASONS if r in low), None)
            if reason is None:
                return "Why do you want to cancel: no longer needed, or ordered by mistake?"
            total = order.get("total", "")
            args = {"order_id": oid, "reason": reason}
            return (
                "cancel_pending_order",
                args,
                f"I'll cancel order {oid} ({reason}); {total} will be refunded.",
            )
        if "return" in low:
            items = _named_items(order, text) or list(order.get("items", []))
            original = order["payment_history"][0]["payment_method_id"]
            method = _method(conv.user, text, original)
            amount = sum(float(i["price"]) for i in items)
            ids_ = sorted(i["item_id"] for i in items)
            names = ", ".join(i["name"] for i in items)
            args = {"order_id": oid, "item_ids": ids_, "payment_method_id": method}
            return (
                "return_delivered_order_items",
                args,
                f"I'll return {names} from order {oid}; {amount:.2f} will be refunded to {method}.",
            )
        if "exchange" in low or "change" in low:
            items = _named_items(order, text)
            if not items:
                return "Which item do you want to change?"
            new = _new_variant(items[0], text)
            if new is None:
                return "I couldn't find that option of the item in stock."
            method = _method(conv.user, text, order["payment_history"][0]["payment_method_id"])
            tool = (
                "exchange_delivered_order_items"
                if order.get("status") == "delivered"
                else "modify_pending_order_items"
            )
            new_price = next(v["price"] for v in items[0]["variants"] if v["item_id"] == new)
            diff = float(new_price) - float(items[0]["price"])
            args = {
                "order_id": oid,
                "item_ids": [items[0]["item_id"]],
                "new_item_ids": [new],
                "payment_method_id": method,
            }
            return (
                tool,
                args,
                f"I'll change the {items[0]['name']} in order {oid} to item {new}; the price "
                f"difference is {abs(diff):.2f}, with {method}.",
            )
        return f"Order {oid} is {order.get('status')}. What would you like to do with it?"

    def _report(self, conv: Conversation) -> dict[str, Any]:
        assert conv.last_tool is not None
        name, _args, reply = conv.last_tool
        ok = reply.get("ok", "error" not in reply)
        if not ok:
            if name == "get_user_details":
                return _say("I couldn't find an account with that e-mail. Could you check it?")
            return _say(f"Sorry, that did not work: {reply.get('error') or reply}")
        result = reply.get("result", reply)
        if name == "transfer_to_human_agents":
            return _say("I've transferred you to a human agent, who will follow up.")
        parts = [f"Done: order {result.get('order_id', '')} is now {result.get('status', '')}."]
        for key, label in (
            ("refunded", "refunded"),
            ("refund_amount", "to be refunded"),
            ("price_difference", "price difference"),
        ):
            if key in result:
                parts.append(f"Amount {label}: {str(result[key]).lstrip('-')}.")
        if name == "modify_user_address":
            parts = ["Done: your address is updated."]
        return _say(" ".join(parts))


REPLY_STEPS = frozenset({"respond", "assess", "synthesize"})
READS = frozenset({"get_user_details", "get_order_details"})


def _filled(answer: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """`answer` with every field `schema` requires that it lacks, at a valid empty value."""
    empty = {"string": "", "boolean": False, "array": [], "object": {}, "integer": 1, "number": 1}
    for name in (schema or {}).get("required", []):
        if name in answer:
            continue
        spec = (schema or {}).get("properties", {}).get(name, {})
        kind = spec.get("type") if isinstance(spec.get("type"), str) else "string"
        answer[name] = spec["enum"][0] if spec.get("enum") else empty.get(kind, "")
    return answer


def _call_of(message: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    calls = message.get("tool_calls") or []
    if not calls:
        return None
    function = calls[0]["function"]
    return str(function["name"]), json.loads(function.get("arguments") or "{}")


def step_answer(
    agent: NaiveAgent,
    step: str,
    messages: list[dict[str, Any]],
    hint: dict[str, Any],
    schema: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """GuideDesk's step `step` answered from the conversation `messages` (OpenAI's shape, a tool
    result last for `compose`) by the same rules as `decide`; None for a step these rules do
    not decide (the deliberative loop's own reasoning steps)."""
    message = agent.decide(messages)
    call = _call_of(message)
    confirmed = hint.get("confirmed")
    if step != "compose" and isinstance(confirmed, dict) and confirmed.get("tool"):
        # The request's confirmation state: the customer said yes to this call; make it.
        call = (str(confirmed["tool"]), dict(confirmed.get("params") or {}))
        message = {"role": "assistant", "content": None}
    if step in REPLY_STEPS:
        name, args = call if call else (None, {})
        answer: dict[str, Any] = {
            "tool_call": name,
            "tool_params": args,
            "confidence": 9,
            "missing_params": [],
            "is_destructive": bool(name) and name not in READS,
            "needs_confirmation": False,
            "needs_more_context": [],
            "complaint": False,
            "response": "" if call else str(message.get("content") or ""),
        }
        return _filled(answer, schema)
    if step == "critique":
        assessment = hint.get("assessment") or {}
        proposed = (assessment.get("tool_call"), assessment.get("tool_params") or {})
        if call is not None and proposed == call:
            return _filled({"decision": "PROCEED", "reasoning": "As asked.", "message": ""}, schema)
        conv = Conversation(messages)
        action = agent._action(conv) if conv.user is not None else None
        if isinstance(action, tuple) and (action[0], action[1]) == proposed and action[2]:
            question = f"{action[2]} Shall I go ahead? Please confirm (yes/no)."
        else:
            question = (
                f"Shall I run {proposed[0]} with {json.dumps(proposed[1], sort_keys=True)}? "
                "Please confirm (yes/no)."
            )
        return _filled(
            {"decision": "ASK_USER", "reasoning": "Not confirmed.", "message": question}, schema
        )
    if step == "compose":
        if call is None:
            return _filled({"response": str(message.get("content") or "")}, schema)
        # A further look-up is needed: a tool result can't call it, the next turn will.
        name, args = call
        if name == "get_order_details":
            text = f"I found your account. Which order number is it: {args['order_id']}?"
        else:
            text = "I've looked that up. What would you like to do next?"
        return _filled({"response": text}, schema)
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request a connection: no idle keep-alive threads

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        server = cast(_Server, self.server)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        messages = body.get("messages") or []
        message = server.agent.decide(messages)
        prompt = sum(_tokens(json.dumps(m)) for m in messages)
        completion = _tokens(json.dumps(message))
        with server.lock:
            server.count += 1
            number = server.count
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        self._send(
            200,
            {
                "id": f"chatcmpl-naive-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or NAIVE_MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
        )

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": NAIVE_MODEL, "object": "model"}]})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    agent: NaiveAgent
    lock: threading.Lock
    count: int


class NaiveAgentServer(Serving):
    """The naive agent served on 127.0.0.1 from a daemon thread."""

    def __init__(self) -> None:
        server = _Server((LOCALHOST, 0), _Handler)
        server.agent = NaiveAgent()
        server.lock = threading.Lock()
        server.count = 0
        self._serving = ServerThread(server)

    @property
    def base_url(self) -> str:
        return f"http://{LOCALHOST}:{self._serving.port}/v1"

    def start(self) -> Self:
        self._serving.start()
        return self

    def stop(self) -> None:
        self._serving.stop()
