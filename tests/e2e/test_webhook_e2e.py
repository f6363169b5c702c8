"""Signed webhooks end to end, real workers and a real receiver on loopback: a signed inbound
message makes its session and a user turn whose reply is POSTed, signed, to the session's URL
with its delivery key; a heartbeat set by a message is POSTed the same way, quietly; a receiver
that fails, hangs or is gone gets the same key on every attempt, and the delivery record says
how it ended."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from typing import Any

import pytest
from support.fake_webhook_receiver import Received, Scripted
from support.harness import wait_until
from support.webhook_fixtures import ADMIN, SECRET, TIMEOUT, Webhook

from hbgw.core.clock import utcnow
from hbgw.gateway.platforms.webhook import signature
from hbgw.gateway.platforms.webhook.channel import public_key
from hbgw.gateway.public_ids import deployment_ids


def live(webhook: Webhook) -> None:
    rt = webhook.gw.rt
    wait_until(lambda: rt.registry.live(rt.now_ms()) == ["w1"], 30, "w1 live")


def session_of(webhook: Webhook, chat: str = "room-1", thread: str | None = "t-1") -> str:
    session = webhook.gw.store.sessions.session_at(
        platform="webhook", chat=chat, thread=thread, now=utcnow(), owner="webhook", create=False
    )
    assert session is not None
    return session.id


def verified_by_hand(request: Received) -> bool:
    """The signature checked without our code: HMAC-SHA256 over '<timestamp>.<body>'."""
    stamp = request.headers["x-hbgw-timestamp"]
    digest = hmac.new(SECRET.encode(), stamp.encode() + b"." + request.body, hashlib.sha256)
    return hmac.compare_digest(request.headers["x-hbgw-signature"], "v1=" + digest.hexdigest())


def heartbeat_session(webhook: Webhook, url: str) -> str:
    """A session whose heartbeat was set by a signed message a minute ago (the API's clock)."""
    said = webhook.message("m-hb", "/heartbeat every 1m check the deploy")
    assert said.status_code == 200 and said.json()["ok"] is True, said.text
    assert said.json()["reply"].startswith("♥ Heartbeat set (every 1m")
    sid = session_of(webhook)
    assert webhook.route(sid, url).status_code == 200
    return sid


def test_a_signed_message_gets_its_reply_posted_signed_to_the_session_url(
    webhook: Webhook,
) -> None:
    receiver, gw = webhook.receiver, webhook.gw
    # The session exists once its first message arrives; give it a URL before the reply.
    first = webhook.message("m-1", "/heartbeat status")
    assert first.status_code == 200 and first.json()["kind"] == "command"
    sid = session_of(webhook)
    routed = webhook.route(sid, receiver.hook("alice"))
    assert routed.json()["url"] == f"{receiver.url}/…"  # the token is never shown back
    with gw.worker("w1"):
        live(webhook)
        asked = webhook.message("m-2", "how is the deploy?")
        assert asked.status_code == 202 and asked.json()["session_id"] == sid
        [post] = wait_until(receiver.kept, 30, "the reply POSTed")
    assert post.path == "/hooks/alice"
    body = post.json
    assert body["text"] == "user reply to: how is the deploy?"
    assert (body["session_id"], body["chat"], body["thread"]) == (sid, "room-1", "t-1")
    assert body["kind"] == "reply" and body["possible_repeat"] is False
    assert post.key == body["delivery_key"] and post.key.startswith("msg:")
    assert "x-hbgw-possible-repeat" not in post.headers
    now = utcnow().timestamp()
    assert signature.problem(SECRET, post.headers, post.body, now) is None
    assert verified_by_hand(post)
    # The user turn's message is on record, answered; nothing but the reply was POSTed.
    texts = [m.text for m in gw.store.messages.list_messages(sid, limit=10)]
    assert "how is the deploy?" in texts and "user reply to: how is the deploy?" in texts
    assert len(receiver.requests) == 1
    # SQL keeps its own id in the key; the receiver got the public one.
    ids = deployment_ids(gw.settings, gw.store.secrets)
    [record] = [d for d in webhook.deliveries() if public_key(d.delivery_key, ids) == post.key]
    assert (record.state, record.platform_message_id) == ("sent", "hook-1")


def test_a_heartbeat_is_posted_with_its_fire_id_and_nothing_else(webhook: Webhook) -> None:
    receiver, gw = webhook.receiver, webhook.gw
    sid = heartbeat_session(webhook, receiver.hook())
    with gw.worker("w1"):
        live(webhook)
        gw.tick()  # set a minute ago by the API's clock: due now
        [run] = gw.final_runs(sid)
    assert run.state == "completed"
    [post] = receiver.requests
    body = post.json
    assert body["kind"] == "heartbeat" and body["ref"] == run.fire_id
    assert body["text"].startswith("heartbeat reply to")
    assert body["thread"] == "t-1" and body["reply_to"] is None
    assert post.key == run.fire_id == body["delivery_key"]
    assert verified_by_hand(post)


def _run_after(webhook: Webhook, *script: Scripted) -> tuple[Any, list[Received]]:
    """A heartbeat turn delivered to a receiver that first answers ``script``; its run and
    every request of its key."""
    receiver, gw = webhook.receiver, webhook.gw
    sid = heartbeat_session(webhook, receiver.hook())
    receiver.next(*script)
    with gw.worker("w1"):
        live(webhook)
        gw.tick()
        [run] = gw.final_runs(sid, timeout=60)
    return run, receiver.of_key(run.fire_id)


def test_a_receiver_failing_twice_gets_the_same_key_until_it_takes_it(webhook: Webhook) -> None:
    run, requests = _run_after(webhook, Scripted(500), Scripted(429, retry_after=1))
    assert [r.status for r in requests] == [500, 429, 200]
    assert requests[2].at - requests[1].at >= 1  # its Retry-After waited out
    assert len({r.key for r in requests}) == 1 and len({r.body for r in requests}) == 1
    assert [r.taken for r in requests] == [False, False, True]
    assert run.state == "completed" and run.delivery.state == "sent"
    assert run.delivery.platform_message_id == "hook-1"


def test_a_hang_past_the_timeout_is_sent_again_and_the_receiver_drops_it(
    webhook: Webhook,
) -> None:
    run, requests = _run_after(webhook, Scripted(hang=TIMEOUT + 1))
    # The hung request was taken (the sender could not know); the repeat carries its key.
    assert [r.taken for r in requests] == [True, False]
    assert requests[0].key == requests[1].key == run.fire_id
    assert len(webhook.receiver.kept()) == 1
    # The receiver answered the repeat {"duplicate": true}: the record says it was dropped.
    assert run.state == "completed" and run.delivery.state == "suppressed"


def test_a_receiver_gone_for_good_fails_the_delivery_at_once(
    webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.receiver.gone = True
    caplog.set_level(logging.WARNING, "hbgw.webhook")
    run, requests = _run_after(webhook)
    assert [r.status for r in requests] == [410]  # not repeated
    assert run.state == "failed" and run.delivery.state == "failed"
    # Issue 29: the record (what a tenant reads) says no more than "could not be delivered"
    # and a reference; the operator's log has the receiver's answer under that reference.
    assert "could not be delivered" in run.detail and "HTTP 410" not in run.detail
    assert "s3cr3t" not in run.detail  # the URL's token is never in a record
    found = re.search(r"reference (wh-[0-9a-f]+)", run.detail)
    assert found is not None, run.detail
    logged = [r for r in caplog.records if getattr(r, "reference", None) == found.group(1)]
    assert len(logged) == 1 and "HTTP 410" in logged[0].getMessage()


def test_a_session_without_a_url_fails_its_delivery_with_a_sentence(webhook: Webhook) -> None:
    gw = webhook.gw
    said = webhook.message("m-hb", "/heartbeat every 1m check the deploy")
    assert said.status_code == 200
    sid = session_of(webhook)
    with gw.worker("w1"):
        live(webhook)
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == "failed"
    assert f"Session {sid} has no webhook URL" in run.detail
    assert webhook.receiver.requests == []


PUBLIC_KEY = re.compile(r"^msg:([1-9][0-9]*)$")


def test_replies_carry_public_ids_the_same_on_every_attempt(webhook: Webhook) -> None:
    """Pins issue 29 (low): the reply's ``Idempotency-Key`` and ``reply_to`` carried SQL's
    sequential message id (``msg:64``, then ``msg:76``; ``"reply_to": "29"``), which tells a
    receiver how many messages everyone sends. They carry the public id the API shows for the
    message, and a retried POST the same key."""
    receiver, gw = webhook.receiver, webhook.gw
    first = webhook.message("m-1", "/heartbeat status")
    assert first.status_code == 200
    sid = session_of(webhook)
    assert webhook.route(sid, receiver.hook()).status_code == 200
    receiver.next(Scripted(500))  # the first reply's first attempt fails: it is sent again
    with gw.worker("w1"):
        live(webhook)
        answered = {}  # what the inbound POST answered for each message: its public id
        for n, text in enumerate(("one", "two"), 1):
            taken = webhook.message(f"m-{n + 1}", text)
            assert taken.status_code == 202
            answered[text] = taken.json()["message_id"]
            wait_until(lambda n=n: len(receiver.kept()) == n, 30, f"reply {n} POSTed")  # type: ignore[misc]
    with webhook.client() as client:
        shown = client.get(f"/v1/sessions/{sid}/messages", headers=ADMIN).json()["messages"]
    asked = {m["text"]: m["id"] for m in shown if m["role"] == "user"}
    assert asked == answered  # one public id per message, wherever the gateway shows it
    replies = receiver.kept()
    keys = []
    for post, text in zip(replies, ("one", "two"), strict=True):
        body = post.json
        found = PUBLIC_KEY.match(post.key or "")
        assert found, post.key
        assert post.key == body["delivery_key"] == f"msg:{asked[text]}"
        assert body["reply_to"] == str(asked[text])
        keys.append(int(found.group(1)))
    # Not SQL's: neither small nor consecutive.
    assert all(key > 1 << 32 for key in keys) and abs(keys[1] - keys[0]) > 1 << 20
    retried = receiver.of_key(replies[0].key or "")
    assert [r.status for r in retried] == [500, 200]
    assert retried[0].body == retried[1].body
