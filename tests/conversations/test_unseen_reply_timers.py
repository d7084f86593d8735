"""The in-process unseen-reply checks (no broker: the demo, the tests) can be cancelled, so that
none of them reads a database that is gone (apps.conversations.services)."""

from __future__ import annotations

import threading

from apps.conversations import services


def test_waiting_checks_are_cancelled_and_never_run(settings, monkeypatch):
    ran: list[int] = []
    monkeypatch.setattr(services, "unseen_replies_email", lambda *, conversation_id: ran.append(1))
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = 3600
    services.unseen_replies_email_schedule(conversation_id=1, client_id=1)
    services.unseen_replies_email_schedule(conversation_id=2, client_id=1)

    assert services.unseen_replies_checks_cancel() == 2
    assert services.unseen_replies_checks_cancel() == 0
    assert ran == []


def test_a_check_that_ran_is_no_longer_waiting(settings, monkeypatch):
    done = threading.Event()
    seen: list[int] = []

    def check(*, conversation_id: int) -> int:
        seen.append(conversation_id)
        done.set()
        return 0

    monkeypatch.setattr(services, "unseen_replies_email", check)
    settings.WIDGET_REPLY_EMAIL_DELAY_SECONDS = 0.01
    services.unseen_replies_email_schedule(conversation_id=7, client_id=1)

    assert done.wait(10)
    assert seen == [7]
    assert services.unseen_replies_checks_cancel() == 0
