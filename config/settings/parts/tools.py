"""Tools: webhook network rules and signatures, teammate approvals, MCP servers."""

from config.settings.parts.celery import BACKGROUND_QUEUE, CELERY_BEAT_SCHEDULE, CELERY_TASK_ROUTES
from config.settings.parts.core import env

# Tool webhooks may only reach public addresses unless this is on (SSRF protection); local
# development and the tests run their tool servers on 127.0.0.1.
TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS = env.bool("TOOL_WEBHOOK_ALLOW_PRIVATE_NETWORKS", default=False)
# Tool webhooks must use https unless this is on (local development and the tests).
TOOL_WEBHOOK_ALLOW_HTTP = env.bool("TOOL_WEBHOOK_ALLOW_HTTP", default=False)
# Also send the pre-Standard-Webhooks `X-GuideDesk-Signature: sha256=<hex>` header during its
# deprecation window (docs/webhooks.md).
TOOL_WEBHOOK_LEGACY_SIGNATURE = env.bool("TOOL_WEBHOOK_LEGACY_SIGNATURE", default=True)
# A tool call that waits for a teammate's approval becomes a hand-off after this long (a tool's
# approval rule may set its own `timeout_minutes`); the beat task checks every minute.
TOOL_APPROVAL_TIMEOUT_MINUTES = env.int("TOOL_APPROVAL_TIMEOUT_MINUTES", default=30)
# Tool calls left waiting for a teammate's approval past their time become hand-offs.
CELERY_BEAT_SCHEDULE["reasoning-expire-approvals"] = {
    "task": "reasoning.expire_approvals",
    "schedule": 60,
}
# How often the beat task lists every enabled MCP server's tools: a tool added or changed on a
# server is found and held (disabled) for review within this time (docs/mcp.md).
MCP_SYNC_SECONDS = env.int("MCP_SYNC_SECONDS", default=300)
CELERY_BEAT_SCHEDULE["tools-mcp-sync"] = {"task": "tools.mcp_sync", "schedule": MCP_SYNC_SECONDS}
CELERY_TASK_ROUTES["tools.mcp_sync"] = {"queue": BACKGROUND_QUEUE}
# One server's listing, queued after a tenant import saved it (docs/tenant-import.md).
CELERY_TASK_ROUTES["tools.mcp_sync_server"] = {"queue": BACKGROUND_QUEUE}
