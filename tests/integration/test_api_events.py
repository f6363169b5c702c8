"""`GET /v1/sessions/{id}/events`: replies and heartbeat turns as server-sent events."""

from __future__ import annotations

import logging
import socket
import threading

import pytest
from support.api_fixtures import ALICE, Api, EventReader
from support.harness import wait_until

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import api_context, create_app
from hbgw.gateway.api.server import api_server


def ready_worker(api: Api) -> None:
    wait_until(lambda: api.gw.rt.registry.live(api.gw.rt.now_ms()) == ["w1"], 30, "w1 live")


def test_the_stream_delivers_a_reply_and_a_heartbeat_turn_not_a_silent_one(api: Api) -> None:
    with api.gw.worker("w1"), api.owner(ALICE) as alice:
        ready_worker(api)
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            assert reader.status == 200
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"})
            wait_until(lambda: reader.of("message"), 30, "the reply event")
            reply = reader.of("message")[0]["data"]
            assert reply["text"] == "user reply to: hello" and reply["heartbeat"] is False

            api.gw.due_now(sid, prompt="check CI")
            api.gw.tick()
            wait_until(lambda: len(reader.of("message")) == 2, 30, "the heartbeat event")
            beat = reader.of("message")[1]
            assert beat["data"]["heartbeat"] is True and beat["data"]["fire_id"]
            assert beat["data"]["text"].startswith("heartbeat reply to: [Heartbeat")
            assert beat["id"] == str(beat["data"]["id"])

            api.gw.due_now(sid, prompt="QUIET unless something changed")
            api.gw.tick()
            runs = api.gw.final_runs(sid, count=2)
            assert [r.state for r in runs] == ["completed", "silent"]
            answers = [
                m
                for m in alice.get(f"/v1/sessions/{sid}/messages").json()["messages"]
                if m["role"] == "assistant" and m["heartbeat"]
            ]
            assert [m["silent"] for m in answers] == [False, True]  # on record, never sent
            # A later reply arrives; nothing came between it and the heartbeat's event.
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": "after the silence"})
            wait_until(lambda: len(reader.of("message")) == 3, 30, "the next reply")
            texts = [e["data"]["text"] for e in reader.of("message")]
            assert texts[2] == "user reply to: after the silence"


def test_resume_from_last_event_id_or_after(api: Api) -> None:
    with api.gw.worker("w1"), api.owner(ALICE) as alice:
        ready_worker(api)
        sid = api.new_session(alice)
        for text in ("one", "two"):
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": text})
        messages = wait_until(
            lambda: [m for m in api.gw.store.messages.list_messages(sid) if m.role == "assistant"][
                1:
            ],
            30,
            "two replies",
        )
        first_reply = next(
            m for m in api.gw.store.messages.list_messages(sid) if m.role == "assistant"
        )
        headers = {"Last-Event-ID": str(api.public_id(first_reply.id))}
        with EventReader(alice, f"/v1/sessions/{sid}/events", headers) as resumed:
            wait_until(lambda: resumed.of("message"), 20, "the missed reply")
            assert [e["data"]["text"] for e in resumed.of("message")] == [messages[0].text]
        with EventReader(alice, f"/v1/sessions/{sid}/events?after=0") as replay:
            wait_until(lambda: len(replay.of("message")) == 2, 20, "both replies")
        with EventReader(alice, f"/v1/sessions/{sid}/events") as fresh:
            wait_until(lambda: len(fresh.comments) >= 1, 20, "the stream to open")
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": "three"})
            wait_until(lambda: fresh.of("message"), 30, "only the new reply")
            assert [e["data"]["text"] for e in fresh.of("message")] == ["user reply to: three"]


def test_the_stream_follows_a_compression(api: Api) -> None:
    with api.gw.worker("w1"), api.owner(ALICE) as alice:
        ready_worker(api)
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            child = alice.post(f"/v1/sessions/{sid}/compress").json()["session"]["id"]
            wait_until(lambda: reader.of("session"), 20, "the move")
            assert reader.of("session")[0]["data"] == {"moved_to": child}
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": "still here"})
            wait_until(lambda: reader.of("message"), 30, "the child's reply")
            assert reader.of("message")[0]["data"]["session_id"] == child


def open_streams(api: Api) -> float:
    """The open-stream gauge, as /metrics shows it."""
    with api.client(None) as anyone:
        for line in anyone.get("/metrics").text.splitlines():
            if line.startswith("hbgw_api_event_streams_open "):
                return float(line.split()[1])
    raise AssertionError("/metrics has no hbgw_api_event_streams_open")


def test_a_closed_stream_is_counted_off(api: Api) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events"):
            wait_until(lambda: open_streams(api) == 1, 20, "one open stream")
        wait_until(lambda: open_streams(api) == 0, 20, "the stream to end")


def test_shutdown_ends_open_streams_without_waiting_out_the_grace(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(api.gw.settings, redis_url=api.gw.redis_url)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = api_server(app, "127.0.0.1", sock.getsockname()[1])
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 20, "the server")
        api.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with api.owner(ALICE) as alice:
            sid = api.new_session(alice)
            with caplog.at_level(logging.INFO), EventReader(alice, f"/v1/sessions/{sid}/events"):
                server.should_exit = True
                thread.join(30)
                assert not thread.is_alive()
        assert api_context(app).stopping.is_set()
        assert not [r for r in caplog.records if "graceful shutdown exceeded" in r.getMessage()]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def test_the_stream_rides_out_a_failing_database(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with api.owner(ALICE) as alice:
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            # The table goes away under the stream: its reads fail until it comes back.
            with api.gw.store.engine.begin() as conn:
                conn.exec_driver_sql("ALTER TABLE messages RENAME TO messages_away")
            try:
                wait_until(
                    lambda: any(
                        getattr(r, "action", None) in ("api.events_retry", "api.events_sweep_retry")
                        for r in caplog.records
                    ),
                    20,
                    "a logged failed read",
                )
            finally:
                with api.gw.store.engine.begin() as conn:
                    conn.exec_driver_sql("ALTER TABLE messages_away RENAME TO messages")
            api.gw.store.messages.add_message(
                sid, role="assistant", kind="assistant", text="back again", now=utcnow()
            )
            wait_until(lambda: reader.of("message"), 20, "the message after the failure")
            assert reader.of("message")[0]["data"]["text"] == "back again"
