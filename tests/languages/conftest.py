"""The widget client fixture, re-exported (the shop and its servers: tests/support/shop.py)."""

from tests.widget.conftest import widget  # noqa: F401
