"""Tenant files (the `tenant_import` format) for the tests that import one client."""

from __future__ import annotations

from typing import Any


def one_client_tenant(
    client: str = "shop", *, plan: dict[str, Any] | None = None, **entry: Any
) -> dict[str, Any]:
    """A tenant file with one plan ("basic" unless `plan` says otherwise) and one client on it:
    slug `client`, named after it; `entry` adds to (or overrides) the client's keys."""
    plan = {"slug": "basic", "name": "Basic"} | (plan or {})
    name = client.replace("-", " ").title()
    return {
        "plans": [plan],
        "clients": [{"slug": client, "name": name, "plan": plan["slug"], **entry}],
    }
