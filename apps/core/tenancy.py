"""Tenancy that fails closed: the scope rule of tenant-owned querysets, and the tenant context
for work outside a request (the resolver that turns a request into its client is
apps/api/resolver.py).

The rule. A queryset of a `TenantOwnedModel` may be evaluated, counted, aggregated, updated or
deleted only when it is *scoped*:

- its WHERE clause pins it (at the top level, not under OR-with-unscoped or NOT) by `exact` or
  `in` on a foreign key to `Client` (`for_client(c)`, `filter(client=c)`, `client_id=…`,
  `client__in=…`, `conversation__client=c`), or on a foreign key to another tenant-owned model
  given *loaded rows* (`Message.objects.filter(conversation=conv)`,
  `conversation__in=[a, b]`, `conversation.messages.all()`, prefetches: each parent was itself
  loaded in scope) or a scoped queryset or subquery (`conversation__in=<scoped queryset>`).
  A bare parent id is no scope: `filter(conversation_id=999)`, `conversation=999`,
  `conversation__in=[1, 2]` and `conversation__id=999` could name any client's row, so they
  need a client filter beside them;
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
from django.db.models.fields.related_lookups import RelatedExact, RelatedIn
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
    clients and runs each in its own client's scope (apps/platform/slots.py)."""
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


# --- parent rows versus parent ids ---------------------------------------------------------------
# By the time a filter reaches the WHERE clause Django has turned a parent row into its id, so the
# guard cannot tell `conversation=conv` from `conversation=999` there. The lookups below, put on
# each foreign key from a tenant-owned model to another (`register_parent_lookups`, at start-up),
# note which of the two they were given when the filter is built: once per filter, never per row.


class ParentRowExact(RelatedExact):
    """`parent=…` on a foreign key to a tenant-owned model; `parent_row` says a loaded row was
    given (a scope), not a bare id (no scope)."""

    parent_row = False

    def get_prep_lookup(self) -> Any:
        self.parent_row = isinstance(self.rhs, models.Model)
        return super().get_prep_lookup()


class ParentRowIn(RelatedIn):
    """`parent__in=…` on a foreign key to a tenant-owned model; `parent_row` says every item is
    a loaded row (a queryset or subquery given here is checked by the guard itself)."""

    parent_row = False

    def get_prep_lookup(self) -> Any:
        if self.rhs_is_direct_value():
            self.rhs = list(self.rhs)  # (RelatedIn makes a list of it too; a generator once)
            self.parent_row = all(isinstance(value, models.Model) for value in self.rhs)
        return super().get_prep_lookup()


def register_parent_lookups(model_list: Any) -> int:
    """Put the parent-row lookups on every foreign key from a tenant-owned model to another
    tenant-owned model (CoreConfig.ready). Returns how many foreign keys got them."""
    count = 0
    for model in model_list:
        if not _is_tenant_model(model):
            continue
        for field in model._meta.concrete_fields:
            if isinstance(field, models.ForeignKey) and _is_tenant_model(field.related_model):
                field.register_lookup(ParentRowExact)
                field.register_lookup(ParentRowIn)
                count += 1
    return count


def _scope_field_kind(field: Any) -> str:
    """ "client" for a foreign key to Client, "parent" for one to another tenant-owned model,
    "" for any other column."""
    if not isinstance(field, models.ForeignKey):
        return ""
    related = field.related_model
    if _is_tenant_model(related):
        return "parent"
    return "client" if related._meta.label == "clients.Client" else ""


def _subquery_scoped(rhs: Any) -> bool | None:
    """Whether a queryset or subquery given to a lookup is scoped; None when `rhs` is neither
    (or not of a tenant-owned model, which needs no scope)."""
    query = rhs if hasattr(rhs, "where") else getattr(rhs, "query", None)
    if query is None or not hasattr(query, "where"):
        return None
    return query_is_scoped(query) if _is_tenant_model(getattr(query, "model", None)) else True


def _lookup_scoped(lookup: Lookup) -> bool:
    if lookup.lookup_name not in ("exact", "in"):
        return False
    lhs = lookup.lhs
    if not isinstance(lhs, Col):
        return False
    kind = _scope_field_kind(lhs.target)
    if not kind:
        return False
    rhs = lookup.rhs
    subquery = _subquery_scoped(rhs)
    if subquery is not None:
        return subquery  # `parent__in=<a queryset>`: that queryset must be scoped
    if kind == "client":
        return True
    # A parent: loaded rows scope, bare ids do not; an expression (`OuterRef("pk")`) ties the
    # row to the enclosing query's rows, which that query's own scope covers.
    return bool(getattr(lookup, "parent_row", False)) or hasattr(rhs, "resolve_expression")


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
