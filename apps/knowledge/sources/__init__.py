"""The kinds of knowledge source, one module each (`manual`, `url`, `sitemap`, `file`), and their
registry.

Adding a kind means adding one module here that declares `KIND = <SourceKind subclass>()`
(`_base.SourceKind`: its name and label, the columns it reads, how it is validated, whether
and how it syncs, whether the beat re-syncs it, whether a tenant file may carry it). Modules
whose name starts with `_` are helpers. Every other module is imported when this package is
(`KnowledgeConfig.ready` imports it at start-up), and one without a complete `KIND` fails
that import. `KnowledgeSource.kind`'s choices, the source services, the sync and its
schedule, `manage.py knowledge_sync`, the admin, the API and the tenant file read the
registry; nothing branches on a kind's name."""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from apps.core.registry import Registry
from apps.knowledge.sources._base import (
    SourceKind,
    SourceKindError,
    WebSourceKind,
    is_http_url,
)

__all__ = [
    "SourceKind",
    "SourceKindError",
    "WebSourceKind",
    "choices",
    "discover",
    "get",
    "is_http_url",
    "kind_of",
    "kinds",
    "names",
    "register",
    "tenant_file_names",
    "unregister",
]

_registry: Registry[SourceKind] = Registry(
    error=SourceKindError,
    duplicate="two source kinds are named {name}",
    kind=SourceKind,
    same=lambda known, new: type(known) is type(new),
)


def register[K: SourceKind](kind: K) -> K:
    """Add a kind (discovery does this for every module of this package)."""
    if isinstance(kind, SourceKind):
        kind.check()
    _registry.register(getattr(kind, "name", ""), kind)
    return kind


def unregister(name: str) -> None:
    """Remove a kind (for tests that register one of their own)."""
    _registry.unregister(name)


def discover(package: str) -> list[SourceKind]:
    """Import every non-underscore module of `package` and register its `KIND`."""
    return _registry.discover(package, "KIND", register)


def get(name: str) -> SourceKind | None:
    return _registry.get(name)


def kind_of(name: str) -> SourceKind:
    """The kind named `name`; a name no module registers (a kind removed since) is a kind
    with nothing to import and nothing to check."""
    return _registry.get(name) or SourceKind()


def kinds() -> list[SourceKind]:
    """Every kind, in the order the admin and the API list them (`rank`, then name)."""
    return sorted(_registry.values(), key=lambda k: (k.rank, k.name))


def names(*, syncs: bool | None = None, resyncs: bool | None = None) -> list[str]:
    """The kinds' names, only those that sync / are re-synced when asked."""
    return [
        k.name
        for k in kinds()
        if (syncs is None or k.syncs == syncs) and (resyncs is None or k.resyncs == resyncs)
    ]


def tenant_file_names() -> list[str]:
    """The kinds a tenant file may declare."""
    return [k.name for k in kinds() if k.in_tenant_file]


def choices() -> list[tuple[str, str | Promise]]:
    """The choices of `KnowledgeSource.kind` (a callable, so a new module is picked up), in the
    page's language (each kind marks its label with gettext_noop)."""
    return [(k.name, gettext_lazy(k.label)) for k in kinds()]


discover(__name__)
