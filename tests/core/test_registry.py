"""The registry behind steps, modes, executors and post-draft hooks (`apps.core.registry`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.core.registry import Registry


class EntryError(TypeError):
    pass


class NoSuchEntry(LookupError):
    """Built from the missing name, like UnknownStep and UnknownMode."""


@dataclass(frozen=True)
class Entry:
    name: str


def make() -> Registry[Entry]:
    return Registry(
        error=EntryError, duplicate="two entries named {name}", kind=Entry, unknown=NoSuchEntry
    )


def test_another_entry_under_a_taken_name_is_refused_with_the_callers_error() -> None:
    registry = make()
    first = registry.register("a", Entry("a"))
    with pytest.raises(EntryError, match="two entries named 'a'"):
        registry.register("a", Entry("a"))  # equal, but another object
    assert registry.require("a") is first


def test_the_same_entry_registered_again_is_a_no_op() -> None:
    registry = make()
    entry = Entry("a")
    assert registry.register("a", entry) is entry
    assert registry.register("a", entry) is entry
    assert registry.items() == [("a", entry)]


def test_an_entry_of_another_kind_is_refused() -> None:
    registry = make()
    with pytest.raises(EntryError, match="is not a Entry"):
        registry.register("a", "a")
    assert registry.names() == []


def test_a_custom_sameness_lets_a_repeat_replace_the_entry() -> None:
    registry: Registry[Entry] = Registry(same=lambda old, new: old.name == new.name)
    registry.register("a", Entry("a"))
    again = registry.register("a", Entry("a"))
    assert registry.require("a") is again
    with pytest.raises(ValueError, match="two entries are named 'a'"):
        registry.register("a", Entry("b"))


def test_unknown_names_raise_the_registrys_error_or_give_none() -> None:
    registry = make()
    with pytest.raises(NoSuchEntry) as raised:
        registry.require("x")
    assert raised.value.args == ("x",)
    assert registry.get("x") is None
    with pytest.raises(KeyError):
        Registry[Entry]().require("x")


def test_unregister_removes_an_entry_and_ignores_a_missing_one() -> None:
    registry = make()
    registry.register("a", Entry("a"))
    registry.unregister("a")
    registry.unregister("never")
    assert "a" not in registry
    assert len(registry) == 0
    registry.register("a", Entry("a"))  # the name is free again
    assert "a" in registry


def test_names_items_and_values_keep_registration_order() -> None:
    registry = make()
    for name in ("c", "a", "b"):
        registry.register(name, Entry(name))
    assert registry.names() == ["c", "a", "b"]
    assert [name for name, _ in registry.items()] == ["c", "a", "b"]
    assert [entry.name for entry in registry.values()] == ["c", "a", "b"]


def test_threads_racing_for_one_name_leave_one_winner() -> None:
    registry = make()
    start = threading.Barrier(16)
    won: list[Entry] = []
    refused: list[Exception] = []

    def claim(i: int) -> None:
        entry = Entry(f"racer {i}")
        start.wait()
        try:
            won.append(registry.register("shared", entry))
        except EntryError as exc:
            refused.append(exc)
        registry.register(f"own {i}", entry)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 15
    assert registry.require("shared") is won[0]
    assert len(registry) == 17


@pytest.fixture
def package(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "registry_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "_helper.py").write_text("raise AssertionError('helpers are not imported')\n")
    for name in ("beta", "alpha"):
        (root / f"{name}.py").write_text(
            f"from tests.core.test_registry import Entry\nENTRY = Entry({name!r})\n"
        )
    sys.path.insert(0, str(tmp_path))
    yield "registry_pkg"
    sys.path.remove(str(tmp_path))
    for module in [m for m in sys.modules if m.split(".")[0] == "registry_pkg"]:
        del sys.modules[module]


def test_discover_registers_what_each_module_declares_skipping_helpers(package: str) -> None:
    registry = make()
    found = registry.discover(package, "ENTRY", lambda e: registry.register(e.name, e))
    assert [e.name for e in found] == ["alpha", "beta"]  # module name order
    assert registry.names() == ["alpha", "beta"]


def test_discover_refuses_a_module_without_its_declaration(package: str, tmp_path: Path) -> None:
    (tmp_path / package / "gamma.py").write_text("NOTHING = None\n")
    registry = make()
    with pytest.raises(EntryError, match=r"registry_pkg\.gamma defines no ENTRY = Entry\(\.\.\.\)"):
        registry.discover(package, "ENTRY", lambda e: registry.register(e.name, e))
