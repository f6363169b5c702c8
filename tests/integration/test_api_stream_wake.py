"""Event streams wake on Redis pub/sub; SQL stays the truth, and one slow sweep per API process
catches a wake-up that was lost (real Redis, real uvicorn, real workers)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI
from support.api_fixtures import ALICE, TOKENS, Api, EventReader, api_overrides
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving
from support.private_redis import PrivateRedis
from support.sql_count import counting_sql

from hbgw.core.clock import utcnow
from hbgw.gateway.api.app import api_context, create_app
from hbgw.state.connection import connect
from hbgw.state.keys import Keys
from hbgw.state.stream_wake import StreamWaker, wake_streams

# Neither the sweep nor a stream's own recheck comes within a test's deadline: only a wake-up can.
SLOW = {"api_stream_poll": 60.0, "api_stream_recheck": 60.0}
SWEEP = "SELECT messages.session_id, max(messages.id)"


@contextmanager
def api_with(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[tuple[Api, FastAPI]]:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **{**api_overrides(), **overrides})
    gw = Gateway(settings, redis_url)
    try:
        app = create_app(settings, celery_app=gw.app, redis_url=redis_url)
        with serving(app) as url:
            yield Api(url, gw), app
    finally:
        gw.close()


def sweeps(lines: list[str]) -> int:
    return sum(line.startswith(SWEEP) for line in list(lines))


def nobody_listens() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def test_a_reply_and_a_heartbeat_answer_arrive_by_their_wake_up(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with (
        api_with(tmp_path, redis_url, redis_ns, **SLOW) as (api, _app),
        api.gw.worker("w1"),
        api.owner(ALICE) as alice,
    ):
        rt = api.gw.rt
        wait_until(lambda: rt.registry.live(rt.now_ms()) == ["w1"], 30, "w1 live")
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": "hello"})
            wait_until(lambda: reader.of("message"), 30, "the reply, woken")
            api.gw.due_now(sid, prompt="check CI")
            api.gw.tick()
            wait_until(lambda: len(reader.of("message")) == 2, 30, "the heartbeat, woken")
            assert reader.of("message")[1]["data"]["heartbeat"] is True


def test_a_message_whose_wake_up_was_lost_arrives_by_the_sweep(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    fast_sweep = {"api_stream_poll": 0.2, "api_stream_recheck": 60.0}
    with (
        api_with(tmp_path, redis_url, redis_ns, **fast_sweep) as (api, _app),
        api.owner(ALICE) as alice,
    ):
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            api.gw.store.messages.add_message(
                sid, role="assistant", kind="assistant", text="unannounced", now=utcnow()
            )
            # The writer's Redis is away: its wake-up is lost, and says so.
            dead = connect(nobody_listens())
            assert wake_streams(dead, api.gw.rt.keys, sid) is False
            dead.close()
            wait_until(lambda: reader.of("message"), 20, "the message, by the sweep")
            assert reader.of("message")[0]["data"]["text"] == "unannounced"


def test_idle_streams_cost_the_sweep_alone(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    streams = 50
    overrides = {"api_stream_poll": 0.3, "api_stream_recheck": 60.0}
    with api_with(tmp_path, redis_url, redis_ns, api_max_streams_per_owner=0, **overrides) as (
        api,
        app,
    ):
        limits = httpx.Limits(max_connections=streams + 5)
        headers = {"Authorization": f"Bearer {TOKENS[ALICE]}"}
        with httpx.Client(base_url=api.url, headers=headers, timeout=30, limits=limits) as alice:
            sids = [api.new_session(alice, chat=f"C{n % 5}") for n in range(streams)]
            with ExitStack() as stack:
                for sid in sids:
                    stack.enter_context(EventReader(alice, f"/v1/sessions/{sid}/events"))
                with counting_sql(api_context(app).store.engine) as count:
                    wait_until(lambda: sweeps(count.lines) >= 8, 30, "eight sweeps")
                    lines = list(count.lines)
        # Between the fourth sweep (the streams' first reads long done, a second once subscribed
        # included) and the eighth, the idle streams read nothing: before the wake-ups, each
        # read 2 statements every poll.
        marks = [n for n, line in enumerate(lines) if line.startswith(SWEEP)]
        between = [line for line in lines[marks[3] : marks[7]] if not line.startswith(SWEEP)]
        assert between == [], between[:5]


def test_the_subscriber_comes_back_after_redis_and_wakes_every_stream(
    private_redis: PrivateRedis,
) -> None:
    private_redis.start()
    keys = Keys("wake")
    waker = StreamWaker(connect(private_redis.url, retry=False), keys)
    waker.start()
    publisher = connect(private_redis.url)

    async def scenario() -> None:
        watch = waker.watch("s1")
        assert await watch.wait(20)  # subscribed: the stream reads once more
        watch.clear()
        assert wake_streams(publisher, keys, "s1")
        assert await watch.wait(20)  # a wake-up
        watch.clear()
        private_redis.stop()
        private_redis.start()
        assert await watch.wait(30)  # back: every stream woken once
        assert waker.reconnects == 1
        watch.clear()
        assert wake_streams(publisher, keys, "s1")
        assert await watch.wait(20)
        watch.close()

    try:
        asyncio.run(scenario())
    finally:
        waker.stop()
        publisher.close()


def test_with_redis_gone_the_streams_fall_back_to_the_sweep(
    tmp_path: Path, redis_ns: str, private_redis: PrivateRedis
) -> None:
    private_redis.start()
    fast_sweep = {"api_stream_poll": 0.2, "api_stream_recheck": 60.0}
    with (
        api_with(tmp_path, private_redis.url, redis_ns, **fast_sweep) as (api, app),
        api.owner(ALICE) as alice,
    ):
        sid = api.new_session(alice)
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            private_redis.stop()
            api.gw.store.messages.add_message(
                sid, role="assistant", kind="assistant", text="while Redis was away", now=utcnow()
            )
            wait_until(lambda: reader.of("message"), 20, "the message, by the sweep")
            private_redis.start()
            waker = api_context(app).waker
            wait_until(lambda: waker.reconnects >= 1, 30, "the subscriber back")
            api.gw.store.messages.add_message(
                sid, role="assistant", kind="assistant", text="Redis is back", now=utcnow()
            )
            api.gw.rt.wake_streams(sid)
            wait_until(lambda: len(reader.of("message")) == 2, 20, "the next message")
