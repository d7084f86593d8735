"""Driving the widget from a test: open it on the demo page, type, take screenshots."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import FrameLocator, Page, expect

from apps.clients.models import Client


def open_widget(page: Page, base_url: str, demo: Client, path: str = "/") -> FrameLocator:
    """The demo shop at `path`: `/` signs in its demo customer, `/?as=anonymous` does not."""
    page.goto(base_url + path)
    expect(page.get_by_role("heading", name="Gear for the long way round.")).to_be_visible()
    launcher = page.locator("#guidedesk-launcher")
    expect(launcher).to_have_accessible_name("Chat with us")
    launcher.click()
    expect(launcher).to_have_attribute("aria-label", "Close chat")
    expect(launcher).to_have_attribute("aria-expanded", "true")
    frame = page.frame_locator("#guidedesk-panel iframe")
    expect(frame.get_by_text(demo.greeting)).to_be_visible()
    expect(frame.get_by_label("Your message")).to_be_focused()
    return frame


def send(frame: FrameLocator, text: str) -> None:
    box = frame.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")


def shot(page: Page, folder: Path, name: str) -> Path:
    path = folder / name
    page.screenshot(path=str(path))
    return path
