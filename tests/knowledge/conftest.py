"""A shop's help site served for real, for the tests of importing and syncing web pages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_site import FakeSite


@pytest.fixture
def site() -> Iterator[FakeSite]:
    """One page, the returns policy; a test adds the pages it needs (tests/knowledge/test_import.py
    serves a whole site of its own under the same name)."""
    with FakeSite() as s:
        s.html("/returns", "Returning an item", "<p>Return unused items within 30 days.</p>")
        yield s
