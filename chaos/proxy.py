"""A TCP proxy of the harness's own between one role and Redis: transparent, hung, or slow.

The ``redis_hang`` fault needs a network that stops answering without closing anything: killing
Redis or a process is seen at once (RST/EOF). While hung, the proxy keeps every connection open
and forwards nothing in either direction (new connections are accepted and held too); what it
read is kept and forwarded, in order, once the hang is over, as TCP would after a partition
heals. Then, for a while, every chunk waits an added latency. Either phase ends by itself at its
deadline (a monotonic clock), so a harness that stops early leaves no hang behind.

It runs an asyncio loop on a daemon thread, and stops at ``stop()`` or at ``lifetime`` seconds,
whichever comes first. It counts what it held back, as evidence that the fault bit.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from hbgw.core.errors import HbgwError

HOST = "127.0.0.1"
CHUNK = 64 * 1024


@dataclass
class ProxyStats:
    connections: int = 0
    open_connections: int = 0
    held_chunks: int = 0  # chunks that waited for a hang to end
    longest_hold_s: float = 0.0
    open_during_hang: int = 0  # connections open when a hang began (none was closed)
    delayed_chunks: int = 0  # chunks that waited the added latency


@dataclass
class RedisProxy:
    upstream_port: int
    lifetime: float  # seconds; the proxy stops by itself after this
    port: int = 0
    stats: ProxyStats = field(default_factory=ProxyStats)
    _hang_until: float = 0.0
    _slow_until: float = 0.0
    _latency: float = 0.0
    _thread: threading.Thread | None = None
    _stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def url_for(self, upstream_url: str) -> str:
        """``upstream_url`` through this proxy: its password and database kept."""
        parts = urlsplit(upstream_url)
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@{HOST}:{self.port}" if auth else f"{HOST}:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def start(self, timeout: float = 10.0) -> str:
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name="chaos-redis-proxy", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout) or not self.port:
            raise HbgwError("The chaos Redis proxy did not start.")
        return self.url

    def hang(self, hang_s: float, slow_s: float, latency_s: float) -> None:
        """Forward nothing for ``hang_s``, then add ``latency_s`` per chunk for ``slow_s``."""
        now = time.monotonic()
        self.stats.open_during_hang = self.stats.open_connections
        self._latency = latency_s
        self._hang_until = now + hang_s
        self._slow_until = now + hang_s + slow_s

    def heal(self) -> None:
        self._hang_until = self._slow_until = 0.0

    def stop(self) -> None:
        self.heal()
        self._stopped.set()  # the loop looks every 0.1 s
        if self._thread is not None:
            self._thread.join(10)

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(ready))
        finally:
            loop.close()
            self._stopped.set()

    async def _main(self, ready: threading.Event) -> None:
        server = await asyncio.start_server(self._client, HOST, 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        deadline = time.monotonic() + self.lifetime
        async with server:
            while not self._stopped.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            server.close()
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        self.stats.open_connections += 1
        try:
            await self._gate()  # a connection made during a hang waits too
            up_reader, up_writer = await asyncio.open_connection(HOST, self.upstream_port)
        except (OSError, asyncio.CancelledError):
            await _close(writer)
            self.stats.open_connections -= 1
            return
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        except asyncio.CancelledError:
            pass
        finally:
            await _close(up_writer)
            await _close(writer)
            self.stats.open_connections -= 1

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await src.read(CHUNK):
                await self._gate()
                dst.write(chunk)
                await dst.drain()
        except OSError:
            pass
        finally:
            # One side closed (Redis restarted, the role exited): close the other, as a direct
            # connection would have been.
            await _close(dst)

    async def _gate(self) -> None:
        """Wait out a hang, then the added latency while slow."""
        now = time.monotonic()
        if now < self._hang_until:
            self.stats.held_chunks += 1
            began = now
            while time.monotonic() < self._hang_until:
                await asyncio.sleep(0.05)
            held = time.monotonic() - began
            self.stats.longest_hold_s = round(max(self.stats.longest_hold_s, held), 2)
        if time.monotonic() < self._slow_until:
            self.stats.delayed_chunks += 1
            await asyncio.sleep(self._latency)


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await writer.wait_closed()
