"""Idle event streams against a real API server: SQL queries per second, and a plain GET's p99.

The API runs under uvicorn in this process (its store on PostgreSQL when it answers, else
SQLite in the scratch dir; Redis the benchmark's private server), so that every SQL statement
it runs is counted through the engine's events. N streams (``GET /v1/sessions/{id}/events``,
one session each) are opened by raw asyncio sockets in a thread of their own and left idle;
then (a) the API's SQL statements are counted over a window of idle time, and (b) a plain
``GET /v1/sessions/{id}`` is timed, sequentially, with no stream open and with the N open.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy import Engine, event

from bench.context import BenchContext, Result
from bench.e2e_systems import postgres_schema
from bench.serving import serving_app
from hbgw.core.clock import utcnow
from hbgw.core.settings import Settings
from hbgw.gateway.api.app import api_context, create_app
from hbgw.sessions.db import make_engine, upgrade

NAME = "streams"

ADMIN = "bench-admin-token-5d1e"
# Quick: 100 streams; full: 1,000 (the goal).
SIZES = {"quick": 100, "full": 1_000}
# Full: longer than one HBGW_API_STREAM_RECHECK (120 s, ± 25 %), so every stream's own read
# falls in it; quick: the sweep alone (the rechecks come after), see ``expected_sql_per_s``.
IDLE_WINDOW_S = {"quick": 12.0, "full": 160.0}
GETS = {"quick": 300, "full": 500}
SETTLE_S = 1.0


@dataclass
class StatementCount:
    statements: int = 0

    def hook(self, *_args: Any) -> None:
        self.statements += 1  # under the GIL: a lost increment would only undercount by one


@contextmanager
def counted(engine: Engine) -> Iterator[StatementCount]:
    count = StatementCount()
    event.listen(engine, "before_cursor_execute", count.hook)
    try:
        yield count
    finally:
        event.remove(engine, "before_cursor_execute", count.hook)


@contextmanager
def api_server(settings: Settings, redis_url: str) -> Iterator[tuple[str, Any]]:
    app = create_app(settings, redis_url=redis_url)
    with serving_app(app, "the API server") as url:
        yield url, app


class Streams:
    """N open event streams, held by raw sockets in an event loop of their own thread."""

    def __init__(self, port: int, sids: list[str]) -> None:
        self.port = port
        self.sids = sids
        self.loop = asyncio.new_event_loop()
        self.writers: list[asyncio.StreamWriter] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def open(self, timeout: float) -> float:
        """Open them all (64 at a time); seconds until every one said ``: connected``."""
        began = time.monotonic()
        future = asyncio.run_coroutine_threadsafe(self._open_all(), self.loop)
        future.result(timeout)
        return time.monotonic() - began

    async def _open_all(self) -> None:
        gate = asyncio.Semaphore(64)

        async def one(sid: str) -> None:
            async with gate:
                await self._open(sid)

        await asyncio.gather(*(one(sid) for sid in self.sids))

    async def _open(self, sid: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        request = (
            f"GET /v1/sessions/{sid}/events HTTP/1.1\r\nHost: bench\r\n"
            f"Authorization: Bearer {ADMIN}\r\nAccept: text/event-stream\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        seen = b""
        while b": connected" not in seen:
            chunk = await reader.read(4096)
            if not chunk:
                raise RuntimeError(f"the stream of {sid} closed before it connected: {seen!r}")
            seen += chunk
        self.writers.append(writer)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close_all(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _close_all(self) -> None:
        for writer in self.writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in self.writers), return_exceptions=True)


def get_latencies(url: str, sids: list[str], count: int) -> list[float]:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    out = []
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for n in range(count):
            began = time.perf_counter()
            answer = client.get(f"/v1/sessions/{sids[n % len(sids)]}")
            out.append(time.perf_counter() - began)
            if answer.status_code != 200:
                raise RuntimeError(f"GET answered {answer.status_code}: {answer.text[:200]}")
    return out


def latency(values: list[float]) -> dict[str, float]:
    """Percentiles of one series of request times, in seconds (nearest rank)."""
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 6)

    return {
        "requests": len(ordered),
        "p50": rank(0.5),
        "p90": rank(0.9),
        "p99": rank(0.99),
        "max": round(ordered[-1], 6),
    }


def bench_settings(ctx: BenchContext, stack: ExitStack) -> Settings:
    """PostgreSQL in a schema of its own (migrated, dropped afterwards), else SQLite."""
    url = f"sqlite:///{ctx.work_dir / 'streams.db'}"
    if ctx.pg_url is not None:
        url = postgres_schema(stack, ctx.pg_url)
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
    return Settings(
        home=ctx.work_dir / "streams-home",
        database_url=url,
        redis_url=ctx.redis_url,
        namespace="bstreams",
        admin_token=ADMIN,
        api_max_streams_per_owner=0,
    )


def measure(ctx: BenchContext, size: int, window_s: float, gets: int) -> Result:
    with ExitStack() as stack:
        settings = bench_settings(ctx, stack)
        return measure_on(ctx, settings, size, window_s, gets)


def measure_on(
    ctx: BenchContext, settings: Settings, size: int, window_s: float, gets: int
) -> Result:
    with api_server(settings, ctx.redis_url) as (url, app):
        store = api_context(app).store
        sids = [
            store.sessions.create_session(platform="bench", chat=f"c{n}", now=utcnow()).id
            for n in range(size)
        ]
        alone = get_latencies(url, sids, gets)
        streams = Streams(int(url.rsplit(":", 1)[1]), sids)
        try:
            opened_s = streams.open(timeout=300)
            time.sleep(SETTLE_S)  # the streams' first reads (open, then subscribed) end
            with counted(store.engine) as count:
                time.sleep(window_s)  # idle: what the streams cost, measured
            busy = get_latencies(url, sids, gets)
        finally:
            streams.close()
    return {
        "streams": size,
        "database": "postgresql" if ctx.pg_url else "sqlite",
        "stream_poll_s": settings.api_stream_poll,
        "stream_recheck_s": settings.api_stream_recheck,
        "open_s": round(opened_s, 2),
        "idle_window_s": window_s,
        "idle_sql_statements": count.statements,
        "idle_sql_per_s": round(count.statements / window_s, 2),
        # What the design predicts: a sweep per poll, 2 statements per stream per recheck.
        "expected_sql_per_s": round(
            1 / settings.api_stream_poll + 2 * size / settings.api_stream_recheck, 2
        ),
        "get_alone_s": latency(alone),
        "get_with_streams_s": latency(busy),
    }


def run(ctx: BenchContext) -> Result:
    size = SIZES[ctx.profile]
    result = measure(ctx, size, IDLE_WINDOW_S[ctx.profile], GETS[ctx.profile])
    result["goals"] = {
        "idle_sql_per_s_max": 20 * size / 1_000,
        "get_p99_s_max": 0.1,
    }
    return result
