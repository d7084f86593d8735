"""`shot` (tests/browser/helpers.py): a capture Chromium refuses once is taken again after the
page's next frame; any other error, or a second refusal, fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError

from tests.browser.helpers import shot

REFUSED = "Protocol error (Page.captureScreenshot): Unable to capture screenshot"


class RefusingPage:
    """Stands in for a Page whose first captures fail with the given messages."""

    def __init__(self, *failures: str) -> None:
        self.failures = list(failures)
        self.calls: list[str] = []

    def screenshot(self, path: str) -> None:
        self.calls.append("screenshot")
        if self.failures:
            raise PlaywrightError(self.failures.pop(0))
        Path(path).write_bytes(b"png")

    def evaluate(self, script: str) -> None:
        self.calls.append("next frame" if "requestAnimationFrame" in script else script)


def test_a_refused_capture_is_taken_again_after_the_next_frame(tmp_path):
    page = RefusingPage(REFUSED)
    path = shot(page, tmp_path, "a.png")
    assert path.read_bytes() == b"png"
    assert page.calls == ["screenshot", "next frame", "screenshot"]


@pytest.mark.parametrize("failures", [("Target page closed",), (REFUSED, REFUSED)])
def test_other_errors_and_a_second_refusal_fail(tmp_path, failures):
    page = RefusingPage(*failures)
    with pytest.raises(PlaywrightError):
        shot(page, tmp_path, "a.png")
    assert not (tmp_path / "a.png").exists()
