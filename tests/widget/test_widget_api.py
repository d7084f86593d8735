"""The customer widget's API (/api/v1/widget/): happy paths through the real turn pipeline (openai
SDK → fake OpenAI-compatible server), every error a visitor can cause, tenant isolation, CORS,
throttles and the server-sent event stream."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import DatabaseError
from django.test import Client as DjangoClient

from apps.conversations.models import Conversation, Kind, Message, Role, Visibility
from apps.conversations.services import conversation_token_matches, message_append
from apps.escalations.services import staff_reply
from apps.reasoning.models import ReasoningTrace
from apps.widget import apis as widget_apis
from apps.widget import streams as widget_streams
from tests.factories import ClientFactory
from tests.support.shop import assess
from tests.widget.conftest import API, Widget, error, sse, stored

pytestmark = pytest.mark.django_db


def rates(settings, **overrides: str) -> None:
    rest: dict[str, Any] = dict(django_settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], **overrides}
    settings.REST_FRAMEWORK = rest


def visible(conversation: Conversation, text: str, role: str = Role.ASSISTANT, **kw: Any):
    return message_append(
        client=conversation.client, conversation=conversation, role=role, text=text, **kw
    )


# ---------------------------------------------------------------------------- conversations


def test_start_a_conversation(widget):
    response = widget.start({"visitor_id": "cust-42"})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "token", "resumed", "identity"}
    assert body["identity"] == {"verified": False, "customer_id": "", "error": None}
    conversation = stored(body["id"])
    assert conversation.client == widget.client
    assert conversation.visitor_id == "cust-42"
    assert conversation_token_matches(conversation=conversation, token=body["token"])
    assert body["token"] not in conversation.visitor_token_hash  # stored hashed


def test_start_without_a_body(widget):
    response = widget.http.post(f"{API}conversations", headers=widget.headers())
    assert response.status_code == 201


@pytest.mark.parametrize("visitor_id", ["x" * 129, {"a": 1}, ["x"]])
def test_start_with_a_bad_visitor_id_names_the_field(widget, visitor_id):
    response = widget.start({"visitor_id": visitor_id})
    assert response.status_code == 400
    assert "visitor_id" in error(response)["fields"]
    assert not Conversation.objects.unscoped("test checks the database directly").exists()


@pytest.mark.parametrize("path", ["conversations", "conversations/{id}/messages"])
def test_malformed_json_is_a_400(widget, path):
    conversation_id, token = widget.conversation()
    response = widget.http.post(
        API + path.format(id=conversation_id),
        data='{"text": "hi"',
        content_type="application/json",
        headers=widget.headers(token),
    )
    assert response.status_code == 400
    assert error(response)["code"] == "parse_error"


def test_a_body_that_is_not_an_object_is_a_400(widget):
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, ["hi"])
    assert response.status_code == 400
    assert error(response)["code"] == "parse_error"


def test_a_huge_body_is_refused_before_parsing(widget):
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, {"text": "hi", "pad": "x" * 70_000})
    assert response.status_code == 413
    assert error(response)["code"] == "too_large"


def test_form_posts_are_refused(widget):
    response = widget.http.post(
        f"{API}conversations", {"visitor_id": "a"}, format="multipart", headers=widget.headers()
    )
    assert response.status_code == 415
    assert error(response)["code"] == "unsupported_media_type"


# ---------------------------------------------------------------------------- widget key


def test_missing_key_is_a_401(widget):
    response = widget.http.post(
        f"{API}conversations", {}, format="json", headers={"Origin": widget.origin}
    )
    assert response.status_code == 401
    assert error(response)["code"] == "not_authenticated"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_unknown_key_is_a_401(widget):
    response = widget.start(**{"X-Widget-Key": "wk_nope"})
    assert response.status_code == 401
    assert error(response)["code"] == "authentication_failed"


def test_switched_off_client_is_a_403(widget):
    widget.client.is_active = False
    widget.client.save()
    response = widget.start()
    assert response.status_code == 403
    assert error(response)["code"] == "inactive"
    assert not Conversation.objects.unscoped("test checks the database directly").exists()


def test_key_in_the_query_string_works(widget):
    response = widget.http.post(
        f"{API}conversations?key={widget.key}", {}, format="json", headers={"Origin": widget.origin}
    )
    assert response.status_code == 201


# ---------------------------------------------------------------------------- origin


def test_origin_not_allowed_is_a_403(widget):
    response = widget.start(Origin="https://evil.example")
    assert response.status_code == 403
    assert error(response)["code"] == "origin_not_allowed"
    assert "https://evil.example" in error(response)["message"]
    assert not Conversation.objects.unscoped("test checks the database directly").exists()


def test_missing_origin_is_a_403(shop):
    response = Widget(shop, origin="").start()
    assert response.status_code == 403
    assert error(response)["code"] == "origin_required"


def test_null_origin_is_a_403(widget):
    response = widget.start(Origin="null")
    assert response.status_code == 403
    assert error(response)["code"] == "origin_not_allowed"


def test_allowed_origin_matches_case_and_trailing_slash_insensitively(widget):
    assert widget.start(Origin=widget.origin.upper() + "/").status_code == 201


def test_guidedesks_own_origin_is_allowed(shop):
    """The chat runs in our iframe page, so its requests come from our own origin."""
    assert Widget(shop, origin="http://testserver").start().status_code == 201


def test_same_origin_get_without_origin_header_is_allowed(shop):
    """Browsers send no Origin on same-origin GETs; Sec-Fetch-Site (or Referer) says it."""
    widget = Widget(shop)
    conversation_id, token = widget.conversation()
    bare = Widget(shop, origin="")
    same_site = bare.messages(conversation_id, token, **{"Sec-Fetch-Site": "same-origin"})
    assert same_site.status_code == 200
    referer = bare.messages(conversation_id, token, Referer="http://testserver/widget/frame/")
    assert referer.status_code == 200
    cross = bare.messages(conversation_id, token, **{"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    foreign_referer = bare.messages(conversation_id, token, Referer="https://evil.example/")
    assert foreign_referer.status_code == 403


# ---------------------------------------------------------------------------- messages


@pytest.mark.django_db(transaction=True)
def test_send_a_message_and_get_the_reply_in_the_response(widget, llm):
    llm.script("assess", assess(response="We're open 8 to 6 on weekdays.", confidence=9))
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, "  When are you open?  ")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"message", "replies", "status", "language"}
    assert body["language"] == "en"
    assert body["status"] == "open"
    assert body["message"]["text"] == "When are you open?"
    assert body["message"]["role"] == "user" and body["message"]["seq"] == 1
    [reply] = body["replies"]
    assert reply["role"] == "assistant" and reply["text"] == "We're open 8 to 6 on weekdays."
    assert reply["visibility"] == "visible"
    assert reply["data"] == {"offline": False, "mode": "adaptive"}  # model name etc. stay inside
    # the turn also stored internal steps; none reached the widget
    conversation = stored(conversation_id)
    assert conversation.messages.filter(visibility=Visibility.INTERNAL).exists()
    assert {m["seq"] for m in body["replies"]} == set(
        conversation.messages.filter(visibility=Visibility.VISIBLE, seq__gt=1).values_list(
            "seq", flat=True
        )
    )


@pytest.mark.django_db(transaction=True)
def test_a_confirmation_request_and_handoff_reach_the_widget_with_their_kind(widget, llm):
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, "I want to talk to a human")
    assert response.status_code == 201
    assert response.json()["status"] == "escalated"
    assert [r["kind"] for r in response.json()["replies"]] == ["handoff"]
    assert llm.requests == []
    # while a person owns the conversation the message waits for staff: nothing pending
    response = widget.say(conversation_id, token, "hello?")
    assert response.status_code == 201
    assert response.json()["replies"] == [] and response.json()["status"] == "escalated"


def test_a_message_post_runs_a_fixed_number_of_queries(widget, django_assert_num_queries):
    """The web's share of every customer message (the turn is queued on commit, which a test's
    transaction never reaches): conversation, visitor, the stored message, its status; the
    key's client comes from the process's row cache (apps/clients/rowcache.py).
    devtools/benchmarks/turn_profile.py measures the same POST."""
    conversation_id, token = widget.conversation()
    assert widget.say(conversation_id, token, "Hello").status_code == 202
    with django_assert_num_queries(9):
        response = widget.say(conversation_id, token, "Where is my order?")
    assert response.status_code == 202


@pytest.mark.django_db(transaction=True)
def test_a_turn_queued_for_a_worker_is_not_read_again(widget, settings, monkeypatch):
    """Once the commit has queued the turn for a worker, the POST answers 202 at once: reading
    the turn's status (or its replies) would only find it queued."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    queued: list[int] = []

    def enqueue(message_id: int, client_id: int) -> bool:
        queued.append(message_id)
        return True  # the broker took it

    def not_again(**kwargs: Any) -> None:
        raise AssertionError("the POST read the queued turn's status")

    monkeypatch.setattr("apps.reasoning.services._enqueue", enqueue)
    monkeypatch.setattr(widget_apis, "widget_turn_status", not_again)
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, "Where is my order?")
    assert response.status_code == 202 and response.json()["pending"] is True
    assert len(queued) == 1


def test_202_when_a_worker_will_run_the_turn(widget, settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    queued: list[int] = []
    monkeypatch.setattr("apps.reasoning.services._enqueue", queued.append)
    conversation_id, token = widget.conversation()
    with_commit = widget.say(conversation_id, token, "Where is my order?")
    assert with_commit.status_code == 202
    body = with_commit.json()
    assert body == {"message": body["message"], "replies": [], "pending": True, "language": "en"}
    assert body["message"]["text"] == "Where is my order?"
    assert (
        Message.objects.unscoped("test checks the database directly")
        .filter(role="user", text="Where is my order?")
        .count()
        == 1
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"text": ""}, "empty"),
        ({"text": "   \n "}, "empty"),
        ({"text": 42}, "string"),
        ({"text": None}, "string"),
        ({"text": ["hi"]}, "string"),
        ({"text": {"a": "b"}}, "string"),
        ({}, "required"),
    ],
)
def test_bad_text_is_a_400_naming_text(widget, body, message):
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, body)
    assert response.status_code == 400
    err = error(response)
    assert list(err["fields"]) == ["text"]
    assert message in json.dumps(err).lower()
    assert not Message.objects.unscoped("test checks the database directly").exists()


def test_text_over_4000_characters_is_a_413(widget):
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, "x" * 4001)
    assert response.status_code == 413
    assert error(response)["code"] == "too_long"
    assert "text" in error(response)["fields"]
    assert not Message.objects.unscoped("test checks the database directly").exists()


def test_exactly_4000_characters_is_fine(widget, settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setattr("apps.reasoning.services._enqueue", lambda message_id, client_id: None)
    conversation_id, token = widget.conversation()
    assert widget.say(conversation_id, token, "x" * 4000).status_code == 202


def test_missing_token_is_a_401_whatever_the_id(widget):
    conversation_id, _ = widget.conversation()
    for cid in (conversation_id, str(uuid.uuid4())):
        response = widget.say(cid, None, "hi")
        assert response.status_code == 401
        assert error(response)["code"] == "not_authenticated"


@pytest.mark.parametrize("make_id", [lambda real: str(uuid.uuid4()), lambda real: "not-a-uuid"])
def test_unknown_conversation_is_a_404(widget, make_id):
    real, token = widget.conversation()
    response = widget.say(make_id(real), token, "hi")
    assert response.status_code == 404
    assert error(response) == {"code": "not_found", "message": "Conversation not found."}


def test_wrong_token_looks_exactly_like_a_missing_conversation(widget):
    conversation_id, _ = widget.conversation()
    wrong = widget.say(conversation_id, "not-the-token", "hi")
    missing = widget.say(str(uuid.uuid4()), "not-the-token", "hi")
    assert wrong.status_code == missing.status_code == 404
    assert wrong.json() == missing.json()
    assert widget.messages(conversation_id, "nope").status_code == 404
    assert not Message.objects.unscoped("test checks the database directly").exists()


# ---------------------------------------------------------------------------- reading


def test_get_messages_returns_visible_messages_only(widget):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    visible(conversation, "Hi", role=Role.USER)
    visible(conversation, "secret reasoning", kind=Kind.ASSESSMENT, visibility=Visibility.INTERNAL)
    visible(conversation, "Hello! How can I help?", data={"offline": True, "model": "x"})
    response = widget.messages(conversation_id, token)
    assert response.status_code == 200
    body = response.json()
    assert [m["text"] for m in body["results"]] == ["Hi", "Hello! How can I help?"]
    assert [m["seq"] for m in body["results"]] == [1, 3]
    assert body["results"][1]["data"] == {"offline": True}
    assert body["has_more"] is False and body["status"] == "open" and body["typing"] is False
    assert "secret" not in response.content.decode()

    after = widget.messages(conversation_id, token, after=1).json()["results"]
    assert [m["seq"] for m in after] == [3]
    assert widget.messages(conversation_id, token, after=3).json()["results"] == []


def test_get_messages_pages(widget, monkeypatch):
    monkeypatch.setattr(widget_apis, "MESSAGES_PAGE_LIMIT", 2)
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    for n in range(3):
        visible(conversation, f"m{n}")
    first = widget.messages(conversation_id, token).json()
    assert [m["text"] for m in first["results"]] == ["m0", "m1"] and first["has_more"]
    rest = widget.messages(conversation_id, token, after=first["results"][-1]["seq"]).json()
    assert [m["text"] for m in rest["results"]] == ["m2"] and not rest["has_more"]


@pytest.mark.parametrize("after", ["-1", "abc", "1.5", "1e3", "99999999999999999999", "٣"])
def test_bad_after_is_a_400_naming_after(widget, after):
    conversation_id, token = widget.conversation()
    response = widget.messages(conversation_id, token, after=after)
    assert response.status_code == 400
    assert list(error(response)["fields"]) == ["after"]


def test_get_messages_reports_typing_while_a_turn_runs(widget):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    user = visible(conversation, "Hi", role=Role.USER)
    ReasoningTrace.objects.create(
        client=widget.client, conversation=conversation, user_message=user, mode="adaptive"
    )
    assert widget.messages(conversation_id, token).json()["typing"] is True


# ---------------------------------------------------------------------------- tenant isolation


@pytest.mark.django_db(transaction=True)
def test_tenant_b_cannot_read_or_post_to_tenant_a_conversation(client_a, client_b, llm):
    a, b = Widget(client_a), Widget(client_b)
    conversation_id, token_a = a.conversation()
    llm.script("assess", assess(response="Hello from A"))
    assert a.say(conversation_id, token_a, "hi").status_code == 201
    conversation = stored(conversation_id)
    before = list(conversation.messages.values_list("pk", "text"))
    status_before = conversation.status
    _, token_b = b.conversation()

    for token in (token_a, token_b):
        assert b.say(conversation_id, token, "I am B").status_code == 404
        assert b.messages(conversation_id, token).status_code == 404
        response = b.events(conversation_id, f"?key={b.key}&token={token}")
        assert response.status_code == 404
        assert error(response)["code"] == "not_found"
    # A's token with A's id but from B's site (Origin) is refused by A's origin list
    assert (
        Widget(client_a, origin=client_b.allowed_origins[0])
        .messages(conversation_id, token_a)
        .status_code
        == 403
    )

    conversation.refresh_from_db()
    assert list(conversation.messages.values_list("pk", "text")) == before
    assert conversation.status == status_before
    assert (
        not Message.objects.unscoped("test checks the database directly")
        .filter(text="I am B")
        .exists()
    )
    assert len(llm.requests) == 1  # only A's own message ran a turn


# ---------------------------------------------------------------------------- event stream


def test_event_stream_sends_status_messages_and_typing(widget, short_streams):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    visible(conversation, "Hi", role=Role.USER)
    visible(conversation, "internal", kind=Kind.CRITIQUE, visibility=Visibility.INTERNAL)
    visible(conversation, "Hello!")
    response = widget.events(conversation_id, f"?key={widget.key}&token={token}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    assert response["Cache-Control"].startswith("no-cache")
    events = sse(response)
    assert events[0] == {"retry": str(widget_streams.RETRY_MS)}
    assert events[1] == {"event": "status", "data": '{"status":"open"}'}
    messages = [e for e in events if e.get("event") == "message"]
    assert [e["id"] for e in messages] == ["1", "3"]
    assert [json.loads(e["data"])["text"] for e in messages] == ["Hi", "Hello!"]
    assert json.loads(messages[0]["data"])["seq"] == 1
    assert events[-1] == {"event": "typing", "data": '{"typing":false}'}
    assert (
        "internal"
        not in b"".join(
            widget.events(conversation_id, f"?key={widget.key}&token={token}").streaming_content
        ).decode()
    )


def test_event_stream_resumes_after_last_event_id(widget, short_streams):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    for text in ("one", "two", "three"):
        visible(conversation, text)
    query = f"?key={widget.key}&token={token}&after=1"
    by_query = [e["id"] for e in sse(widget.events(conversation_id, query)) if "id" in e]
    assert by_query == ["2", "3"]
    # on reconnect the browser repeats the original URL and sends Last-Event-ID: the header wins
    resumed = widget.events(conversation_id, query, **{"Last-Event-ID": "2"})
    assert [e["id"] for e in sse(resumed) if "id" in e] == ["3"]


def test_event_stream_headers_auth_works_too(widget, short_streams):
    conversation_id, token = widget.conversation()
    response = widget.http.get(
        f"{API}conversations/{conversation_id}/events", headers=widget.headers(token)
    )
    assert response.status_code == 200
    assert sse(response)[1]["event"] == "status"


def test_event_stream_errors_are_json(widget):
    conversation_id, token = widget.conversation()
    missing_token = widget.events(conversation_id, f"?key={widget.key}")
    assert missing_token.status_code == 401
    assert error(missing_token)["code"] == "not_authenticated"
    bad_id = widget.events(
        conversation_id, f"?key={widget.key}&token={token}", **{"Last-Event-ID": "x"}
    )
    assert bad_id.status_code == 400
    assert list(error(bad_id)["fields"]) == ["Last-Event-ID"]
    no_key = widget.events(conversation_id, f"?token={token}")
    assert no_key.status_code == 401


def test_event_stream_reports_typing_and_status_changes(widget, short_streams):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    user = visible(conversation, "Hi", role=Role.USER)
    trace = ReasoningTrace.objects.create(
        client=widget.client, conversation=conversation, user_message=user, mode="adaptive"
    )
    query = f"?key={widget.key}&token={token}"
    events = sse(widget.events(conversation_id, query))
    assert {"event": "typing", "data": '{"typing":true}'} in events

    trace.status = "done"
    trace.save()
    staff_reply(client=widget.client, conversation=conversation, text="Hi, this is Sam.")
    events = sse(widget.events(conversation_id, query + "&after=1"))
    assert {"event": "status", "data": '{"status":"escalated"}'} in events
    kinds = [
        (json.loads(e["data"])["role"], json.loads(e["data"])["kind"])
        for e in events
        if e.get("event") == "message"
    ]
    assert kinds == [("system", "handoff"), ("staff", "text")]
    assert {"event": "typing", "data": '{"typing":false}'} in events


def test_a_stream_read_takes_one_query_plus_one_when_messages_moved(
    widget, django_assert_num_queries
):
    conversation_id, _token = widget.conversation()
    conversation = stored(conversation_id)
    cursor = widget_streams._StreamCursor(sent_seq=0)
    user = visible(conversation, "Hi", role=Role.USER)
    with django_assert_num_queries(2):  # state + typing in one, the new message in another
        first = cursor.poll(client=widget.client, conversation_id=conversation.pk)
    assert '"text":"Hi"' in "".join(first)
    ReasoningTrace.objects.create(
        client=widget.client, conversation=conversation, user_message=user, mode="adaptive"
    )
    with django_assert_num_queries(1):  # only the typing indicator changed
        typing = cursor.poll(client=widget.client, conversation_id=conversation.pk)
    assert typing == ['event: typing\ndata: {"typing":true}\n\n']


def test_a_deliberative_turns_progress_reaches_the_typing_event_never_its_content(
    widget, short_streams
):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    user = visible(conversation, "Hi", role=Role.USER)
    ReasoningTrace.objects.create(
        client=widget.client,
        conversation=conversation,
        user_message=user,
        mode="deliberative",
        progress={"step": 3, "max_steps": 10},
    )
    conversation.messages.create(
        client=widget.client,
        seq=99,
        role="assistant",
        kind="reasoning_step",
        visibility="internal",
        text="secret reasoning",
    )
    query = f"?key={widget.key}&token={token}"
    events = sse(widget.events(conversation_id, query))
    [typing] = [json.loads(e["data"]) for e in events if e.get("event") == "typing"]
    assert typing == {
        "typing": True,
        "progress": {"step": 3, "max_steps": 10, "text": "Thinking it through… step 3"},
    }
    assert "secret reasoning" not in json.dumps(events)


def test_a_clarifying_questions_options_reach_the_widget(widget):
    conversation_id, token = widget.conversation()
    conversation = stored(conversation_id)
    conversation.messages.create(
        client=widget.client,
        seq=1,
        role="assistant",
        kind="clarification",
        text="Refund or exchange?",
        data={"options": ["Refund", "Exchange"], "model": "gpt", "mode": "deliberative"},
    )
    [message] = widget.messages(conversation_id, token).json()["results"]
    assert message["kind"] == "clarification"
    assert message["data"] == {"options": ["Refund", "Exchange"], "mode": "deliberative"}


def test_event_stream_polls_until_its_time_is_up(widget, monkeypatch):
    monkeypatch.setattr(widget_streams, "STREAM_SECONDS", 0.2)
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(widget_streams, "HEARTBEAT_SECONDS", 0.05)
    conversation_id, token = widget.conversation()
    response = widget.events(conversation_id, f"?key={widget.key}&token={token}")
    chunks = list(response.streaming_content)  # ends by itself
    assert any(chunk == b": keep-alive\n\n" for chunk in chunks)
    assert len(chunks) < 20


def test_event_stream_ends_cleanly_when_the_conversation_goes_or_the_database_fails(
    widget, monkeypatch
):
    # a long stream with a heartbeat on every idle poll: only an early end leaves it empty
    monkeypatch.setattr(widget_streams, "STREAM_SECONDS", 5)
    monkeypatch.setattr(widget_streams, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(widget_streams, "HEARTBEAT_SECONDS", 0)
    conversation_id, _ = widget.conversation()
    conversation = stored(conversation_id)
    visible(conversation, "Hello!")
    stream = widget_streams.event_stream(
        client=widget.client, conversation_id=conversation.pk, after=0
    )
    assert next(stream).startswith("retry:")
    assert "Hello!" in next(stream)
    conversation.delete()
    assert list(stream) == []  # deleted meanwhile: the stream just ends

    def broken(**kwargs: Any) -> None:
        raise DatabaseError("connection lost")

    monkeypatch.setattr(widget_streams, "conversation_live_state", broken)
    stream = widget_streams.event_stream(client=widget.client, conversation_id=1, after=0)
    assert list(stream) == [f"retry: {widget_streams.RETRY_MS}\n\n"]  # no 500 mid-stream


# ---------------------------------------------------------------------------- CORS


def preflight(origin: str, path: str = f"{API}conversations", method: str = "POST") -> Any:
    return DjangoClient().options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )


def test_preflight_from_an_allowed_origin(shop):
    response = preflight("https://shop.example")
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "https://shop.example"
    assert "POST" in response["Access-Control-Allow-Methods"]
    allowed_headers = response["Access-Control-Allow-Headers"].lower()
    assert "authorization" in allowed_headers and "content-type" in allowed_headers
    assert "origin" in response["Vary"].lower()


def test_preflight_from_other_origins_gets_no_cors_headers(shop):
    assert "Access-Control-Allow-Origin" not in preflight("https://evil.example")
    # only the widget API answers for the clients' origins
    other = preflight("https://shop.example", path="/api/v1/conversations/")
    assert "Access-Control-Allow-Origin" not in other


def test_preflight_with_a_key_checks_that_clients_origins(shop, client_b):
    path = f"{API}conversations?key={client_b.widget_key}"
    assert "Access-Control-Allow-Origin" not in preflight("https://shop.example", path=path)
    ok = preflight(client_b.allowed_origins[0], path=path)
    assert ok["Access-Control-Allow-Origin"] == client_b.allowed_origins[0]


def test_cross_origin_responses_carry_cors_headers_only_when_allowed(widget, client_b):
    ok = widget.start()
    assert ok["Access-Control-Allow-Origin"] == widget.origin
    assert "Retry-After" in ok["Access-Control-Expose-Headers"]
    # an origin another client allows is still refused for this client, with no CORS grant
    refused = widget.start(Origin=client_b.allowed_origins[0])
    assert refused.status_code == 403
    assert "Access-Control-Allow-Origin" not in refused


# ---------------------------------------------------------------------------- throttles


def test_messages_are_throttled_per_conversation(widget, settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setattr("apps.reasoning.services._enqueue", lambda message_id, client_id: None)
    rates(settings, widget_messages="2/min")
    conversation_id, token = widget.conversation()
    assert widget.say(conversation_id, token, "one").status_code == 202
    assert widget.say(conversation_id, token, "two").status_code == 202
    refused = widget.say(conversation_id, token, "three")
    assert refused.status_code == 429
    assert error(refused)["code"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 60
    assert (
        not Message.objects.unscoped("test checks the database directly")
        .filter(text="three")
        .exists()
    )
    # another conversation has its own allowance
    other_id, other_token = widget.conversation()
    assert widget.say(other_id, other_token, "three").status_code == 202


def test_requests_are_throttled_per_ip(widget, settings):
    rates(settings, widget_ip="3/min")
    for _ in range(3):
        assert widget.start().status_code == 201
    refused = widget.start()
    assert refused.status_code == 429 and "Retry-After" in refused
    assert Conversation.objects.unscoped("test checks the database directly").count() == 3
    # the IP bucket comes from REMOTE_ADDR, not a header the visitor can make up
    assert widget.start(**{"X-Forwarded-For": "203.0.113.9"}).status_code == 429
    elsewhere = widget.http.post(
        f"{API}conversations", {}, format="json", headers=widget.headers(), REMOTE_ADDR="10.0.0.2"
    )
    assert elsewhere.status_code == 201


def test_requests_are_throttled_per_widget_key(widget, settings, client_b):
    rates(settings, widget_key="2/min")
    assert widget.start().status_code == 201
    assert widget.start(REMOTE_ADDR="10.0.0.2").status_code == 201
    assert widget.start(REMOTE_ADDR="10.0.0.3").status_code == 429
    assert Widget(client_b).start().status_code == 201  # another client is not affected


def test_starting_conversations_is_throttled_per_ip(widget, settings):
    rates(settings, widget_conversations="1/min")
    conversation_id, token = widget.conversation()
    assert widget.start().status_code == 429
    assert widget.messages(conversation_id, token).status_code == 200  # reading still works


# ---------------------------------------------------------------------------- the iframe page


def test_frame_page(shop):
    shop.greeting = "Hi <b>there</b> & welcome"
    shop.allowed_origins = ["https://shop.example", "https://www.shop.example"]
    shop.save()
    response = DjangoClient().get(f"/widget/frame/?key={shop.widget_key}")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Hi &lt;b&gt;there&lt;/b&gt; &amp; welcome" in html
    assert f'data-widget-key="{shop.widget_key}"' in html
    assert 'data-api-base="/api/v1/widget/"' in html
    assert "<script>" not in html  # scripts come from static files only
    csp = response["Content-Security-Policy"]
    assert "frame-ancestors 'self' https://shop.example https://www.shop.example" in csp
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "X-Frame-Options" not in response
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.parametrize("key", ["", "wk_unknown"])
def test_frame_page_for_an_unknown_key(db, key):
    response = DjangoClient().get(f"/widget/frame/?key={key}")
    assert response.status_code == 404
    assert "Chat is unavailable" in response.content.decode()
    assert "frame-ancestors 'self'" in response["Content-Security-Policy"]


def test_frame_page_for_a_switched_off_client(shop):
    shop.is_active = False
    shop.save()
    response = DjangoClient().get(f"/widget/frame/?key={shop.widget_key}")
    assert response.status_code == 404
    assert shop.widget_key not in response.content.decode()


# ---------------------------------------------------------------------------- the demo page


def test_demo_page_embeds_the_first_active_clients_widget(db, settings):
    settings.DEMO_PAGE = True  # the demo/local settings
    ClientFactory(slug="off", name="Off Shop", is_active=False)
    shop = ClientFactory(slug="trail", name="Trailhead Outfitters")
    html = DjangoClient().get("/").content.decode()
    assert "Trailhead Outfitters" in html
    assert f'data-widget-key="{shop.widget_key}"' in html
    assert 'src="/static/widget.js"' in html
    assert 'href="/admin/"' in html and 'href="/api/docs/"' in html


def test_demo_page_without_a_client(db, settings):
    settings.DEMO_PAGE = True
    html = DjangoClient().get("/").content.decode()
    assert "make demo" in html
    assert "widget.js" not in html


# ---------------------------------------------------------------------------- OpenAPI


def test_widget_endpoints_are_in_the_openapi_schema(db):
    from django.urls import include, path
    from drf_spectacular.generators import SchemaGenerator

    patterns = [path("api/v1/widget/", include("apps.widget.urls"))]
    schema = SchemaGenerator(patterns=patterns).get_schema(request=None, public=True)
    paths = schema["paths"]
    assert set(paths) == {
        "/api/v1/widget/conversations",
        "/api/v1/widget/conversations/{conversation_id}/messages",
        "/api/v1/widget/conversations/{conversation_id}/events",
        "/api/v1/widget/conversations/{conversation_id}/contact",
        "/api/v1/widget/conversations/{conversation_id}/rating",
    }
    post = paths["/api/v1/widget/conversations/{conversation_id}/messages"]["post"]
    assert {"201", "202", "413", "429"} <= set(post["responses"])


def test_nul_bytes_are_a_400_or_unknown_key_never_a_500(widget):
    """PostgreSQL refuses NUL in text; such input must be turned away before any query."""
    conversation_id, token = widget.conversation()
    response = widget.say(conversation_id, token, "hi\u0000there")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"text": "Must not contain NUL characters."}
    assert widget.start(**{"X-Widget-Key": "wk_\u0000"}).status_code == 401
    assert DjangoClient().get("/widget/frame/?key=%00").status_code in {400, 403, 404}
