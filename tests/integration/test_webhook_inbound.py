"""The signed-webhook endpoint refuses before it stores: a forged, unsigned, replayed or
oversized request gets 401 or 413, a signed body of the wrong shape 422 with a sentence, and
none of them leaves a session, a message or a Redis key; each refusal is counted. A sender's
retry (the same ``id``) is stored once. A session's URL is set and shown through the API."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support.api_fixtures import TOKENS
from support.webhook_fixtures import ADMIN, Webhook, webhook_deployment

from hbgw.gateway.platforms.webhook.inbound import read_message


def stored(webhook: Webhook) -> tuple[int, int, int]:
    """Sessions and messages in SQL, and the inbound Redis keys of the deployment."""
    gw = webhook.gw
    sessions = gw.store.sessions.list_sessions(limit=200)
    messages = sum(len(gw.store.messages.list_messages(s.id, limit=200)) for s in sessions)
    keys = list(gw.rt.client.scan_iter(match=f"{gw.settings.namespace}:inbound:*"))
    return len(sessions), messages, len(keys)


def rejects(webhook: Webhook, reason: str) -> float:
    with webhook.client() as client:
        text = client.get("/metrics").text
    pattern = rf'hbgw_platform_inbound_rejects_total{{platform="webhook",reason="{reason}"}} (\S+)'
    found = re.search(pattern, text)
    assert found, text
    return float(found.group(1))


def body(**fields: object) -> bytes:
    return json.dumps({"id": "m-1", "chat": "room-1", "text": "hello", **fields}).encode()


def test_forged_replayed_oversized_and_malformed_requests_store_nothing(webhook: Webhook) -> None:
    empty = stored(webhook)
    assert empty == (0, 0, 0)
    forged = webhook.post(body(), secret="not-the-secret")
    assert forged.status_code == 401
    assert "X-Hbgw-Signature" in forged.json()["error"]["message"]
    assert webhook.post(body(), sign=False).status_code == 401
    signed = webhook.post(body(id="m-0")).request.headers  # one taken, to tamper with
    taken = stored(webhook)
    assert taken[:2] == (1, 1)
    with webhook.client() as client:
        tampered = client.post(
            "/platforms/webhook/messages",
            content=body(id="m-0", text="hellO"),
            headers={k: signed[k] for k in ("x-hbgw-signature", "x-hbgw-timestamp")},
        )
    assert tampered.status_code == 401

    # 310 ahead, not 301: a stamp rounded down and a loaded machine can bring 301 ahead under
    # the 300 s window (the verifier reads its clock a moment later).
    for age in (301, -310):
        replayed = webhook.post(body(id="m-2"), age=age)
        assert replayed.status_code == 401
        assert "more than five minutes" in replayed.json()["error"]["message"]
    oversized = webhook.post(body(id="m-3", text="x" * 5000))
    assert oversized.status_code == 413

    for bad, sentence in [
        (b"{nope", "the body is not JSON."),
        (b"[1, 2]", "The body must be a JSON object with id, chat and text."),
        (body(id=""), "'id' is required: a non-empty string."),
        (body(chat=7), "'chat' is required: a non-empty string."),
        (body(thread=""), "'thread' must be a non-empty string."),
        (body(reply_url="http://x"), "Unknown field 'reply_url'"),
        (body(id="x" * 201), "'id' is longer than 200 characters."),
    ]:
        answer = webhook.post(bad)
        assert answer.status_code == 422, answer.text
        assert sentence in answer.json()["error"]["message"]
    assert stored(webhook) == taken
    assert rejects(webhook, "signature") == 3
    assert rejects(webhook, "replay") == 2
    assert rejects(webhook, "too_large") == 1
    assert rejects(webhook, "malformed") == 7


def test_a_retried_message_is_stored_once(webhook: Webhook) -> None:
    first = webhook.message("m-7", "are you there?")
    assert first.status_code == 202 and first.json()["duplicate"] is False
    again = webhook.message("m-7", "are you there?")
    assert again.status_code == 200 and again.json() == {
        "kind": "duplicate", "id": "m-7", "duplicate": True,
    }  # fmt: skip
    # Redis forgot the id (or was away): the idempotency key still keeps one message.
    sent = read_message({"id": "m-7", "chat": "room-1", "thread": "t-1", "text": "x"})
    webhook.gw.rt.client.delete(webhook.gw.rt.keys.inbound_event("webhook", sent.seen_id))
    third = webhook.message("m-7", "are you there?")
    assert third.status_code == 202 and third.json()["duplicate"] is True
    sid = first.json()["session_id"]
    assert [m.text for m in webhook.gw.store.messages.list_messages(sid, limit=10)] == [
        "are you there?"
    ]


def test_a_thread_is_a_session_and_commands_are_answered_in_the_response(
    webhook: Webhook,
) -> None:
    a = webhook.message("m-1", "/hb every 1m check", thread="t-a")
    b = webhook.message("m-2", "/hb every 2m other", thread="t-b")
    top = webhook.message("m-3", "/heartbeat every soon x", thread=None, owner="acme")
    assert a.json()["session_id"] != b.json()["session_id"] != top.json()["session_id"]
    assert a.json()["reply"].startswith("♥ Heartbeat set (every 1m")
    assert top.status_code == 200 and top.json()["ok"] is False
    assert top.json()["error"]["code"] == "invalid_input" and top.json()["reply"]
    session = webhook.gw.store.sessions.get_session(top.json()["session_id"])
    assert (session.platform, session.chat, session.thread, session.owner) == (
        "webhook", "room-1", None, "acme",
    )  # fmt: skip


def test_the_session_url_is_set_checked_and_shown_without_its_secret(webhook: Webhook) -> None:
    sid = webhook.message("m-1", "/heartbeat status").json()["session_id"]
    for bad in ("ftp://example.com/x", "not a url", "https://", "https://h/x#frag"):
        answer = webhook.route(sid, bad)
        assert answer.status_code == 422, bad
        assert "webhook URL" in answer.json()["error"]["message"]
    set_ = webhook.route(sid, "https://user:pw@hooks.example:8443/T0/B0/XYZ?token=abc")
    assert set_.status_code == 200
    assert set_.json() == {
        "session_id": sid, "url": "https://hooks.example:8443/…", "default": False,
        "reply": f"Session {sid}'s messages are POSTed to https://hooks.example:8443/….",
    }  # fmt: skip
    assert (
        webhook.gw.store.webhooks.webhook_url(sid)
        == "https://user:pw@hooks.example:8443/T0/B0/XYZ?token=abc"
    )
    with webhook.client() as client:
        shown = client.get(f"/v1/sessions/{sid}/webhook", headers=ADMIN).json()
        stranger = {"Authorization": f"Bearer {TOKENS['alice']}"}
        assert client.get(f"/v1/sessions/{sid}/webhook", headers=stranger).status_code == 404
        assert "XYZ" not in json.dumps(shown) and "abc" not in json.dumps(shown)
    cleared = webhook.route(sid, None)
    assert cleared.json()["url"] is None and "nowhere" in cleared.json()["reply"]
    # A session of another platform has no URL to set.
    with webhook.client() as client:
        cli = client.post("/v1/sessions", json={"platform": "cli", "chat": "c"}, headers=ADMIN)
    refused = webhook.route(cli.json()["session_id"], "https://hooks.example/x")
    assert refused.status_code == 422 and "not webhook" in refused.json()["error"]["message"]


def test_without_the_secret_the_endpoint_does_not_exist(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with webhook_deployment(
        tmp_path, redis_url, redis_ns, webhook_secret=None, platforms="cli"
    ) as off:
        answer = off.post(body())
    assert answer.status_code == 404
