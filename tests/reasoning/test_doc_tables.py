"""The docs tables generated from the registries are what the generator writes: a step, mode or
executor added (or changed) without `python manage.py doc_tables` fails here."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from apps.reasoning import doc_tables


@pytest.mark.parametrize("path", sorted({b.path for b in doc_tables.BLOCKS}))
def test_the_generated_docs_tables_are_up_to_date(path: str) -> None:
    current, generated = doc_tables.render_file(path)
    assert current == generated, f"{path} is out of date: run python manage.py doc_tables"


def test_the_check_fails_when_a_registry_changes_without_regenerating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = doc_tables.BLOCKS[0]
    changed = doc_tables.Block(block.path, block.name, lambda: block.render() + "\n| x |")
    monkeypatch.setattr(doc_tables, "BLOCKS", [changed, *doc_tables.BLOCKS[1:]])
    with pytest.raises(CommandError, match="out of date"):
        call_command("doc_tables", "--check")
