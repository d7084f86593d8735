"""What the model gets to see. Standard mode: everything the business configured, plus the
knowledge-base chunks for the message. Adaptive mode: a minimal context (seed: ~500–800 tokens)
plus keys fetched on demand — a `kb:<query>` key searches the knowledge base
(`apps.reasoning.knowledge`, which also gives the bounded topics list, as data).

Trusted (system message): what staff configure for the business — name, about, hours,
contact, policies, `ai_instructions`, the tools. Data (user-message blocks, `steps._data`):
the FAQs (`DATA_KEYS`: knowledge-base content, imported or written), like every other
knowledge-base text."""

from __future__ import annotations

import json
from typing import Any

from apps.clients.models import Client
from apps.conversations.models import Message, Role
from apps.knowledge.selectors import business_info_for
from apps.reasoning.knowledge import KB_PREFIX
from apps.reasoning.steps import data_blocks
from apps.tools.models import ClientTool, PendingAction

POLICY_KEYS = ("returns", "shipping", "privacy", "terms")
STATIC_KEYS = (
    *(f"policies.{k}" for k in POLICY_KEYS),
    "faqs",
    "ai_instructions",
    "contact.full",
    "about.full",
)
TOOL_SCHEMA_PREFIX = "tool_schema:"
# Keys whose text is knowledge-base content (FAQ questions and answers, which may come from an
# imported page): sent in a data block (`reference_message`), never in a system message.
DATA_KEYS = frozenset({"faqs"})
KB_KEY = f"{KB_PREFIX}<search words>"

_ROLE_FOR_LLM = {Role.USER: "user", Role.ASSISTANT: "assistant", Role.STAFF: "assistant"}


def available_keys(tools: list[ClientTool], *, knowledge: bool = False) -> list[str]:
    """The keys adaptive mode may ask for; with `knowledge`, `kb:<search words>` too."""
    kb = [KB_KEY] if knowledge else []
    return [*STATIC_KEYS, *kb, *(f"{TOOL_SCHEMA_PREFIX}{t.name}" for t in tools)]


def keys_text(keys: list[str]) -> str:
    """The keys adaptive mode may ask for, as its prompt lists them: the policies folded
    (`policies.<returns|shipping>`); the tool schemas left to the minimal context's Tools line,
    which names the tools and the key (`tool_schema:<name>`); `kb:<search words>` next to the
    knowledge base's topics line. So the line does not grow with every tool."""
    policies = [k.removeprefix("policies.") for k in keys if k.startswith("policies.")]
    out: list[str] = []
    for key in keys:
        if key.startswith("policies."):
            if policies:
                out.append(f"policies.<{'|'.join(policies)}>")
                policies = []
        elif not key.startswith(TOOL_SCHEMA_PREFIX):
            out.append(key)
    return ", ".join(out)


def _info(client: Client, *, faqs: bool = True) -> dict[str, Any]:
    """The business info document; without `faqs`, only what the client row holds (no query)."""
    if faqs:
        return business_info_for(client)
    return dict(client.business_info) if isinstance(client.business_info, dict) else {}


def tool_line(tool: ClientTool) -> str:
    """One tool as the minimal context lists it (the lines are joined with ", ")."""
    return f"{tool.name} ({tool.kind})"


def tool_schema_text(tool: ClientTool) -> str:
    params = json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
    return f"{tool.name} ({tool.kind}): {tool.description}\nparameters: {params}"


def minimal_context(
    *,
    client: Client,
    tools: list[ClientTool],
    name: bool = True,
    signin_tools: list[ClientTool] | None = None,
) -> str:
    """The basics (name, about, hours, contact) and the tools' names. Reads no FAQs and no
    knowledge topics: they are knowledge — data blocks (`knowledge.topics_message`), fetched on
    demand. Without `name`, no "Business:" line (`assess` names the business in its first
    line). `signin_tools`: tools only a verified customer may use, named so the model explains."""
    info = client.business_info if isinstance(client.business_info, dict) else {}
    about = info.get("about", {})
    contact = info.get("contact", {})
    lines = [f"Business: {client.name}"] if name else []
    if about.get("description"):
        lines.append(f"About: {about['description']}")
    if contact.get("hours"):
        lines.append(f"Hours: {contact['hours']}")
    reach = ", ".join(v for v in (contact.get("phone"), contact.get("email")) if v)
    if reach:
        lines.append(f"Contact: {reach}")
    listed = ", ".join(tool_line(t) for t in tools) or "none"
    lines.append(f"Tools (fetch tool_schema:<name> before calling one): {listed}")
    if signin_tools:
        lines.append(signin_line(signin_tools))
    return "\n".join(lines)


def signin_line(tools: list[ClientTool]) -> str:
    """The tools that need a signed-in customer, while this one is not: named (no schema) so
    the model explains instead of calling them; the guards refuse them anyway."""
    names = ", ".join(t.name for t in tools)
    return (
        f"Only for signed-in customers (this visitor is NOT signed in, so these cannot run; "
        f"if they ask for one, explain that they need to sign in first): {names}"
    )


def fetch_context(
    *, client: Client, tools: list[ClientTool], keys: list[str]
) -> tuple[dict[str, str], list[str]]:
    """Resolve context keys to text. Returns (found, unknown keys)."""
    info = _info(client, faqs="faqs" in keys)
    by_name = {t.name: t for t in tools}
    found: dict[str, str] = {}
    unknown: list[str] = []
    for key in keys:
        key = key.strip()
        text: str | None = None
        if key.startswith("policies."):
            text = info.get("policies", {}).get(key.removeprefix("policies."))
        elif key == "faqs":
            faqs = info.get("faqs", [])
            text = "\n".join(f"Q: {f['question']}\nA: {f['answer']}" for f in faqs) or None
        elif key == "ai_instructions":
            text = info.get("ai_instructions")
        elif key == "contact.full":
            contact = info.get("contact", {})
            text = "\n".join(f"{k}: {v}" for k, v in contact.items()) or None
        elif key == "about.full":
            about = info.get("about", {})
            text = about.get("full") or about.get("description")
        elif key.startswith(TOOL_SCHEMA_PREFIX):
            tool = by_name.get(key.removeprefix(TOOL_SCHEMA_PREFIX))
            text = tool_schema_text(tool) if tool else None
        if text:
            found[key] = text
        else:
            unknown.append(key)
    return found, unknown


def full_context(
    *, client: Client, tools: list[ClientTool], signin_tools: list[ClientTool] | None = None
) -> str:
    """Everything staff configured for the business, for standard mode: basics, policies,
    instructions and tool schemas. No FAQs: those that live as knowledge-base articles come as
    the chunks that match the message, and a business info document that carries its own (one
    not migrated, or a simulation's) has them sent as data (`own_faqs`, `reference_message`)."""
    info = _info(client, faqs=False)
    parts = [minimal_context(client=client, tools=[]).rsplit("\nTools", 1)[0]]
    keys = [k for k in STATIC_KEYS if k not in DATA_KEYS]
    keys += [f"{TOOL_SCHEMA_PREFIX}{t.name}" for t in tools]
    found, _ = fetch_context(client=client, tools=tools, keys=keys)
    for key, text in found.items():
        if key == "contact.full" or (key == "about.full" and not info.get("about", {}).get("full")):
            continue
        parts.append(f"## {key}\n{text}")
    if not tools:
        parts.append("## tools\nnone")
    if signin_tools:
        parts.append(f"## sign-in\n{signin_line(signin_tools)}")
    return "\n\n".join(parts)


def own_faqs(client: Client) -> dict[str, str]:
    """The FAQs a business info document carries itself (`{"faqs": text}`, or {} when the
    FAQs live as knowledge-base articles): data, for `reference_message`."""
    if "faqs" not in _info(client, faqs=False):
        return {}
    found, _ = fetch_context(client=client, tools=[], keys=["faqs"])
    return found


def split_data(found: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Fetched sections as (trusted configuration, knowledge data — `DATA_KEYS`)."""
    trusted = {k: v for k, v in found.items() if k not in DATA_KEYS}
    return trusted, {k: v for k, v in found.items() if k in DATA_KEYS}


def reference_message(sections: dict[str, str]) -> list[dict[str, str]]:
    """Knowledge sections (the FAQs) as a data block in a user message ([] for none)."""
    if not sections:
        return []
    text = "\n\n".join(f"## {key}\n{body}" for key, body in sections.items())
    return [data_blocks.data_message(data_blocks.block(data_blocks.KNOWLEDGE, text))]


def history_messages(messages: list[Message]) -> list[dict[str, str]]:
    """Visible conversation messages as chat turns (staff replies appear as the assistant).

    The conversation keeps its own roles; a data-block tag typed into it is defused
    (`steps._data.neutralise`) so that a customer's message cannot pose as one of our blocks."""
    out = []
    for message in messages:
        role = _ROLE_FOR_LLM.get(Role(message.role))
        if role and message.text:
            text = message.text if message.role != Role.STAFF else f"[staff] {message.text}"
            out.append({"role": role, "content": data_blocks.neutralise(text)})
    return out


def pending_text(pending: PendingAction | None, declined: PendingAction | None = None) -> str:
    """What the customer just did with a confirmation question, as facts for a
    `confirmation state` data block (the params may hold what the customer typed; what to do
    with it is `steps._shared.CONFIRMATION_RULE`, in the system message)."""
    lines = []
    if pending is not None:
        params = json.dumps(pending.params, ensure_ascii=False, sort_keys=True)
        lines.append(f"confirmed: {pending.tool.name} {params}")
    if declined is not None:
        params = json.dumps(declined.params, ensure_ascii=False, sort_keys=True)
        lines.append(f"declined: {declined.tool.name} {params}")
    return "\n".join(lines)
