"""A registry of named entries: the one shape behind the LLM steps, the reasoning modes, the tool
executors, the knowledge source kinds and the post-draft hooks.

Each registry keeps its own words: the error class a bad or duplicate entry raises (e.g.
`StepDefinitionError`), the error an unknown name raises (or `None` where a missing entry is
normal), and the order its callers list entries in (the registry keeps registration order;
a caller sorts where it always has). Registering is thread-safe; registering the same entry
again under its name is allowed (a module imported twice), another entry under a taken name is
refused. `unregister` is for tests that register an entry of their own.

`discover` imports every module of a package whose name does not start with `_` and registers
what each declares under one attribute (`STEP = Step(...)`, `MODE = Mode(...)`)."""

from __future__ import annotations

import importlib
import operator
import pkgutil
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Registry"]


class Registry[T]:
    """Named entries of one kind, in registration order.

    * `kind` (optional) is the class every entry must be an instance of;
    * `error` is the exception class raised for a wrong entry or a taken name, with
      `duplicate` its message (`{name}` is the name's repr);
    * `unknown(name)` builds the exception `require` raises for a missing name (`KeyError` by
      default); `get` returns `None` instead;
    * `same(old, new)` says whether registering `new` under `old`'s name is a repeat, not a
      clash (identity by default); a repeat replaces the entry.
    """

    def __init__(
        self,
        *,
        error: type[Exception] = ValueError,
        duplicate: str = "two entries are named {name}",
        kind: type[T] | None = None,
        unknown: Callable[[str], Exception] = KeyError,
        same: Callable[[T, T], bool] = operator.is_,
    ) -> None:
        self._entries: dict[str, T] = {}
        self._lock = threading.Lock()
        self._error = error
        self._duplicate = duplicate
        self._kind = kind
        self._unknown = unknown
        self._same = same

    def register(self, name: str, entry: T) -> T:
        """Add `entry` under `name`; raise the registry's error if the name is taken by another
        entry (or the entry is not of the registry's kind)."""
        if self._kind is not None and not isinstance(entry, self._kind):
            raise self._error(f"{entry!r} is not a {self._kind.__name__}")
        with self._lock:
            known = self._entries.get(name)
            if known is not None and not self._same(known, entry):
                raise self._error(self._duplicate.format(name=repr(name)))
            self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry named `name`, if any (for tests that register one of their own)."""
        with self._lock:
            self._entries.pop(name, None)

    def get(self, name: str) -> T | None:
        return self._entries.get(name)

    def require(self, name: str) -> T:
        """The entry named `name`; the registry's unknown-name error when there is none."""
        try:
            return self._entries[name]
        except KeyError:
            raise self._unknown(name) from None

    def names(self) -> list[str]:
        """Every name, in registration order."""
        with self._lock:
            return list(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """Every (name, entry), in registration order."""
        with self._lock:
            return list(self._entries.items())

    def values(self) -> list[T]:
        with self._lock:
            return list(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def discover(self, package: str, attribute: str, register: Callable[[T], T]) -> list[T]:
        """Import every module of `package` whose name does not start with `_` (helpers), and
        pass what each declares as `attribute` to `register` (the caller's own, which names the
        entry). A module that declares none fails with the registry's error."""
        found: list[T] = []
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__):
            if info.name.startswith("_"):
                continue
            submodule = importlib.import_module(f"{package}.{info.name}")
            entry: Any = getattr(submodule, attribute, None)
            if self._kind is not None and not isinstance(entry, self._kind):
                kind = self._kind.__name__
                raise self._error(
                    f"{submodule.__name__} defines no {attribute} = {kind}(...); "
                    "helpers go in _modules"
                )
            found.append(register(entry))
        return found
