"""Who sees what, and how the API refuses: owner isolation on every route, the admin token,
401s, JSON errors with stable codes, size limits, input limits, idempotent retries."""

from __future__ import annotations

import select
import socket
from typing import Any

import pytest
from support.api_fixtures import ADMIN_TOKEN, ALICE, BOB, TOKENS, Api

# Every route that names a session: (method, path after /v1/sessions/{id}, JSON body).
SESSION_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "", None),
    ("POST", "/messages", {"text": "hello"}),
    ("POST", "/messages", {"text": "/heartbeat status"}),
    ("GET", "/messages", None),
    ("GET", "/heartbeat", None),
    ("PUT", "/heartbeat", {"schedule": "every 10m", "prompt": "check"}),
    ("DELETE", "/heartbeat", None),
    ("POST", "/heartbeat/pause", None),
    ("POST", "/heartbeat/resume", None),
    ("GET", "/runs", None),
    ("POST", "/compress", None),
    ("POST", "/reset", None),
    ("POST", "/suspend", None),
    ("POST", "/resume", None),
    ("GET", "/events", None),
]
ROUTE_IDS = [f"{m} {p or '/'} {(b or {}).get('text', '')}".strip() for m, p, b in SESSION_ROUTES]


@pytest.mark.parametrize(("method", "path", "body"), SESSION_ROUTES, ids=ROUTE_IDS)
def test_another_owners_session_answers_like_a_missing_one(
    api: Api, method: str, path: str, body: dict[str, Any] | None
) -> None:
    with api.owner(ALICE) as alice, api.owner(BOB) as bob:
        sid = api.new_session(alice)
        alice.put(f"/v1/sessions/{sid}/heartbeat", json={"schedule": "10m", "prompt": "check"})
        before = alice.get(f"/v1/sessions/{sid}").json()
        missing = "s0000000000000000"
        theirs = bob.request(method, f"/v1/sessions/{sid}{path}", json=body)
        nothing = bob.request(method, f"/v1/sessions/{missing}{path}", json=body)
        assert theirs.status_code == nothing.status_code == 404
        assert theirs.json() == {
            "error": {"code": "not_found", "message": f"There is no session {sid}."}
        }
        assert nothing.json()["error"]["message"] == f"There is no session {missing}."
        assert theirs.headers.keys() == nothing.headers.keys()
        # Nothing changed for the owner: no message, same heartbeat, same session.
        assert alice.get(f"/v1/sessions/{sid}").json() == before
        assert alice.get(f"/v1/sessions/{sid}/messages").json()["messages"] == []
        assert alice.get(f"/v1/sessions/{sid}/heartbeat").json()["status"] == "active"
        assert bob.get("/v1/sessions").json()["sessions"] == []


def test_admin_sees_every_session_and_may_name_an_owner(api: Api) -> None:
    with api.owner(ALICE) as alice, api.owner(BOB) as bob, api.admin() as admin:
        a, b = api.new_session(alice), api.new_session(bob)
        listed = {s["id"]: s["owner"] for s in admin.get("/v1/sessions").json()["sessions"]}
        assert listed == {a: ALICE, b: BOB}
        assert admin.get(f"/v1/sessions/{b}").status_code == 200
        set_by_admin = admin.put(
            f"/v1/sessions/{a}/heartbeat", json={"schedule": "10m", "prompt": "ops"}
        )
        assert set_by_admin.status_code == 200
        made = admin.post("/v1/sessions", json={"platform": "cli", "chat": "x", "owner": BOB})
        assert made.status_code == 201 and made.json()["owner"] == BOB
        assert made.json()["id"] in {s["id"] for s in bob.get("/v1/sessions").json()["sessions"]}
        refused = alice.post("/v1/sessions", json={"platform": "cli", "chat": "x", "owner": BOB})
        assert refused.status_code == 422
        assert refused.json()["error"]["code"] == "invalid_input"


@pytest.mark.parametrize("token", [None, "wrong", TOKENS[ALICE] + "x", ADMIN_TOKEN[:-1]])
def test_without_a_valid_token_401(api: Api, token: str | None) -> None:
    with api.client(token) as client:
        for method, path in [("GET", "/v1/sessions"), ("POST", "/v1/sessions")]:
            answer = client.request(method, path, json={"platform": "cli", "chat": "x"})
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "unauthorized"
            assert token is None or token not in answer.text


def test_errors_have_codes_and_one_sentence(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        unknown = alice.post("/v1/sessions", json={"platform": "a", "chat": "b", "colour": "red"})
        assert unknown.status_code == 422
        assert unknown.json() == {
            "error": {
                "code": "invalid_input",
                "message": "The field 'colour' is not accepted here; remove it.",
            }
        }
        extra = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "hi", "to": "x"})
        assert extra.status_code == 422 and "'to'" in extra.json()["error"]["message"]
        missing = alice.post(f"/v1/sessions/{sid}/messages", json={})
        assert missing.json()["error"]["message"] == "The field 'text' is required."
        broken = alice.post(f"/v1/sessions/{sid}/messages", content=b"{not json")
        assert broken.status_code == 422 and broken.json()["error"]["code"] == "invalid_input"
        empty_chat = alice.post("/v1/sessions", json={"platform": "slack", "chat": " "})
        assert empty_chat.status_code == 422 and "chat" in empty_chat.json()["error"]["message"]
        nul = alice.get("/v1/sessions", params={"after": "s\x00"})
        assert nul.status_code == 422 and "NUL" in nul.json()["error"]["message"]
        route = alice.get("/v1/nothing")
        assert route.status_code == 404 and route.json()["error"]["code"] == "not_found"
        method = alice.patch(f"/v1/sessions/{sid}")
        assert method.status_code == 405
        assert method.json()["error"]["code"] == "method_not_allowed"


def test_too_long_text_and_too_large_body(api: Api) -> None:
    limit = api.gw.settings.max_message_chars
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        long = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "x" * (limit + 1)})
        assert long.status_code == 422 and long.json()["error"]["code"] == "invalid_input"
        assert str(limit) in long.json()["error"]["message"]
        size = api.gw.settings.api_max_body_bytes
        huge = alice.post(f"/v1/sessions/{sid}/messages", json={"text": "y" * size})
        assert huge.status_code == 413
        assert huge.json()["error"]["code"] == "payload_too_large"

        def chunks() -> Any:
            yield b'{"text": "'
            for _ in range(size // 1024 + 1):
                yield b"z" * 1024
            yield b'"}'

        chunked = alice.post(
            f"/v1/sessions/{sid}/messages",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert chunked.status_code == 413
        assert alice.get(f"/v1/sessions/{sid}/messages").json()["messages"] == []


def test_an_idempotent_retry_returns_the_first_message(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        url = f"/v1/sessions/{sid}/messages"
        key = {"Idempotency-Key": "retry-1"}
        first = alice.post(url, json={"text": "only once"}, headers=key)
        again = alice.post(url, json={"text": "only once"}, headers=key)
        assert first.status_code == again.status_code == 202
        assert again.json()["message_id"] == first.json()["message_id"]
        assert first.json()["duplicate"] is False and again.json()["duplicate"] is True
        other = alice.post(url, json={"text": "only once"}, headers={"Idempotency-Key": "k2"})
        assert other.json()["message_id"] != first.json()["message_id"]
        rows = [m for m in api.gw.store.messages.list_messages(sid) if m.text == "only once"]
        assert len(rows) == 2


def test_command_errors_are_answers_with_the_grammars_sentence(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        url = f"/v1/sessions/{sid}/messages"
        too_often = alice.post(url, json={"text": "/heartbeat every 0.5s check"})
        assert too_often.status_code == 200
        body = too_often.json()
        assert body["ok"] is False and body["kind"] == "command"
        assert body["error"]["code"] == "invalid_input"
        assert body["reply"] == body["error"]["message"]
        assert "minimum" in body["reply"].lower() or "at least" in body["reply"].lower()
        no_heartbeat = alice.post(url, json={"text": "/heartbeat pause"}).json()
        assert no_heartbeat["ok"] is False and no_heartbeat["error"]["code"] == "invalid_state"
        put = alice.put(
            f"/v1/sessions/{sid}/heartbeat", json={"schedule": "every 0.5s", "prompt": "x"}
        )
        assert put.status_code == 422 and put.json()["error"]["message"] == body["reply"]
        not_a_schedule = alice.put(
            f"/v1/sessions/{sid}/heartbeat", json={"schedule": "soon", "prompt": "x"}
        )
        assert not_a_schedule.status_code == 422
        pause = alice.post(f"/v1/sessions/{sid}/heartbeat/pause")
        assert pause.status_code == 409 and pause.json()["error"]["code"] == "invalid_state"


def test_a_refused_body_gets_its_413_not_a_reset(api: Api) -> None:
    """A client that sent a whole body over the limit reads the 413: the server drops what it
    was sent before closing. A close with those bytes unread would make the kernel send a reset,
    which throws the 413 away on the client's side once it arrives (seen on a busy machine)."""
    # Past what uvicorn reads ahead before the app asks (64 KiB), within what is drained.
    size = 512 * 1024
    assert size > api.gw.settings.api_max_body_bytes
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
    host, port = api.url.removeprefix("http://").split(":")
    request = (
        f"POST /v1/sessions/{sid}/messages HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {TOKENS[ALICE]}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode() + b"x" * size
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(request)
        # Wait until the server has closed its side (a FIN, or a reset): only then read.
        poller = select.poll()
        poller.register(conn, select.POLLRDHUP | select.POLLERR | select.POLLHUP)
        assert poller.poll(30_000), "the server never closed the connection"
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"payload_too_large" in answer
