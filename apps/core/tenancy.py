"""Tenancy that fails closed: the scope rule of tenant-owned querysets, and the tenant context
for work outside a request (the resolver that turns a request into its client is
apps/core/resolver.py).

The rule. A queryset of a `TenantOwnedModel` may be evaluated, counted, aggregated, updated or
deleted only when it is *scoped*:

- its WHERE clause pins it (at the top level, not under OR-with-unscoped or NOT) by `exact` or
  `in` on a foreign key to `Client` (`for_client(c)`, `filter(client=c)`, `client_id=…`,
  `client__in=…`, `conversation__client=c`), or on a foreign key to another tenant-owned row
  (`Message.objects.filter(conversation=conv)`, `conversation.messages.all()`, prefetches): that
  parent was itself loaded in scope. A subquery given to such an `in` must be scoped too;
- or it runs inside `tenant_scope(client_id)`: then the client's filter is added when it is
  evaluated, whatever else it filters on (a query there sees one client's rows only);
- or it says `unscoped("why")`: platform operators, the sweeper, rollups, commands.

Anything else raises `TenantScopeError`. Creating rows (`create`, `bulk_create`, `save`) and
`bulk_update` of loaded rows need no scope; Django's own lookups (cascades, FK access,
`refresh_from_db`) go through `_base_manager`, a plain manager; migrations use historical plain
managers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Self

from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models.expressions import Col
from django.db.models.lookups import Lookup
from django.db.models.sql.where import AND, WhereNode


class TenantScopeError(ImproperlyConfigured):
    """A tenant-owned query without a tenant scope: a bug in the calling code, never a user
    error (so it is not an ApplicationError and answers 500)."""


_current_tenant: ContextVar[int | None] = ContextVar("guidedesk_tenant", default=None)

_UNSCOPED_ATTR = "tenant_unscoped"  # on the sql.Query: cloned with it, so chained calls keep it
_CONTEXT_ATTR = "tenant_context_applied"


def current_tenant() -> int | None:
    """The client id of the enclosing `tenant_scope`, or None."""
    return _current_tenant.get()


@contextlib.contextmanager
def tenant_scope(client_id: int, *, switch: bool = False) -> Iterator[int]:
    """Run a block for one client: tenant-owned queries in it see that client's rows only, and a
    `for_client()` of another client raises. Nesting is allowed for the same client only —
    except `switch=True`, for the fleet's slot scheduler, which hands one thread jobs of many
    clients and runs each in its own client's scope (apps/core/slots.py)."""
    client_id = int(client_id)
    outer = _current_tenant.get()
    if outer is not None and outer != client_id and not switch:
        raise TenantScopeError(
            f"tenant_scope({client_id}) inside tenant_scope({outer}): work for another client "
            "must not run inside this client's scope."
        )
    token = _current_tenant.set(client_id)
    try:
        yield client_id
    finally:
        _current_tenant.reset(token)


def _is_tenant_model(model: Any) -> bool:
    from apps.core.models import TenantOwnedModel

    return isinstance(model, type) and issubclass(model, TenantOwnedModel)


def _is_scope_field(field: Any) -> bool:
    if not isinstance(field, models.ForeignKey):
        return False
    related = field.related_model
    if _is_tenant_model(related):
        return True
    return bool(related._meta.label == "clients.Client")


def _lookup_scoped(lookup: Lookup) -> bool:
    if lookup.lookup_name not in ("exact", "in"):
        return False
    lhs = lookup.lhs
    if not isinstance(lhs, Col) or not _is_scope_field(lhs.target):
        return False
    rhs = lookup.rhs
    if hasattr(rhs, "where") and _is_tenant_model(getattr(rhs, "model", None)):
        return query_is_scoped(rhs)  # `parent__in=<a queryset>`: that queryset must be scoped
    return True


def _node_scoped(node: Any) -> bool:
    if getattr(node, "negated", False):
        return False
    if isinstance(node, WhereNode):
        if node.connector == AND:
            return any(_node_scoped(child) for child in node.children)
        return bool(node.children) and all(_node_scoped(child) for child in node.children)
    if isinstance(node, Lookup):
        return _lookup_scoped(node)
    return False


def query_is_scoped(query: Any) -> bool:
    """Whether a sql.Query of a tenant-owned model is scoped by its filters or explicitly."""
    if getattr(query, _UNSCOPED_ATTR, None):
        return True
    if query.is_empty():
        return True
    if query.combinator:
        return all(query_is_scoped(q) for q in query.combined_queries)
    return _node_scoped(query.where)


class TenantQuerySet[M: models.Model](models.QuerySet[M]):
    """The queryset of every tenant-owned model: refuses to run unscoped (module docstring)."""

    def for_client(self, client: models.Model) -> Self:
        """The way request-serving code reads tenant data: always scoped to one client."""
        if client is None or client.pk is None:
            raise ValueError("for_client() needs a saved client")
        current = _current_tenant.get()
        if current is not None and current != client.pk:
            raise TenantScopeError(
                f"{self.model.__name__}.objects.for_client({client.pk}) inside "
                f"tenant_scope({current}): another client's rows are out of reach here."
            )
        return self.filter(client=client)

    def for_current_client(self) -> Self:
        """Scoped to the client of the enclosing `tenant_scope` (a task's, a scheduler job's):
        for code that is handed only a row id. Raises outside a tenant scope."""
        current = _current_tenant.get()
        if current is None:
            raise TenantScopeError(
                f"{self.model.__name__}.objects.for_current_client() outside tenant_scope(): "
                "run this inside the client's scope (a TenantTask does) or use for_client()."
            )
        return self.filter(client_id=current)

    def unscoped(self, reason: str) -> Self:
        """Cross-tenant on purpose (platform operators, the sweeper, rollups, commands). The
        reason says why, for the reader and the audit (scripts/tenancy_audit.py)."""
        if not isinstance(reason, str) or not reason.strip():
            raise TenantScopeError(
                f"{self.model.__name__}.objects.unscoped() needs a reason: say why this query "
                "must cross tenants."
            )
        clone = self._chain()  # type: ignore[attr-defined]  # QuerySet's own, unstubbed
        setattr(clone.query, _UNSCOPED_ATTR, reason)
        return clone

    # --- the guard -----------------------------------------------------------------------------

    def _tenant_guard(self) -> None:
        query = self.query
        if getattr(query, _UNSCOPED_ATTR, None):
            return
        current = _current_tenant.get()
        if current is not None and not query.combinator:
            if not getattr(query, _CONTEXT_ATTR, False):
                query.add_q(models.Q(client_id=current))
                setattr(query, _CONTEXT_ATTR, True)
            return
        if query_is_scoped(query):
            return
        name = self.model.__name__
        raise TenantScopeError(
            f"Unscoped query on the tenant-owned model {name}: scope it with "
            f"{name}.objects.for_client(client) (or filter on client / a tenant-owned parent), "
            f"run it inside tenant_scope(client_id), or — only for work that must cross "
            f'tenants — say so with {name}.objects.unscoped("why").'
        )

    def _fetch_all(self) -> None:
        if self._result_cache is None:
            self._tenant_guard()
        super()._fetch_all()

    def iterator(self, chunk_size: int | None = None) -> Iterator[M]:
        self._tenant_guard()
        return super().iterator(chunk_size)

    def count(self) -> int:
        if self._result_cache is None:
            self._tenant_guard()
        return super().count()

    def exists(self) -> bool:
        if self._result_cache is None:
            self._tenant_guard()
        return super().exists()

    def contains(self, obj: models.Model) -> bool:
        if self._result_cache is None:
            self._tenant_guard()
        return super().contains(obj)

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._tenant_guard()
        return super().aggregate(*args, **kwargs)

    def update(self, **kwargs: Any) -> int:
        self._tenant_guard()
        return super().update(**kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        self._tenant_guard()
        return super().delete()

    def explain(self, *, format: str | None = None, **options: Any) -> str:
        self._tenant_guard()
        return super().explain(format=format, **options)

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        # Like save(): rows the caller already holds, updated by primary key.
        rows = self.unscoped("bulk_update of rows already loaded")
        return models.QuerySet.bulk_update(rows, objs, fields, batch_size=batch_size)
