"""A TCP delay line in front of Redis: every chunk reaches the other side ``delay_s`` later.

The +150 ms case of the Redis-latency benchmark (bench/redis_latency.py) puts a deployment's
processes behind it. Unlike the chaos harness's slow proxy (chaos/proxy.py, which sleeps before
each chunk, so a connection's chunks queue behind each other's sleep), chunks here are stamped
when read and written at stamp + delay, in order: pipelined commands and replies overlap, as on
a long link, and only the latency is added, each way. An asyncio loop on a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field

from hbgw.core.errors import HbgwError

HOST = "127.0.0.1"
CHUNK = 64 * 1024


@dataclass
class DelayProxy:
    upstream_port: int
    delay_s: float  # added to every chunk, in each direction
    port: int = 0
    connections: int = 0
    chunks: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stop: asyncio.Event | None = None
    _ready: threading.Event = field(default_factory=threading.Event)

    def start(self, timeout: float = 10.0) -> int:
        self._thread = threading.Thread(target=self._serve, name="bench-delay-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or not self.port:
            raise HbgwError("The Redis delay proxy did not start.")
        return self.port

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._client, HOST, 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await asyncio.sleep(self.delay_s)  # the SYN's way there
        try:
            up_reader, up_writer = await asyncio.open_connection(HOST, self.upstream_port)
        except OSError:
            await _close(writer)
            return
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except asyncio.CancelledError:
            pass
        finally:
            await _close(up_writer)
            await _close(writer)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Read into a queue of (due, chunk); a second task writes each at its due time."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.create_task(self._send(queue, dst))
        try:
            while chunk := await src.read(CHUNK):
                self.chunks += 1
                queue.put_nowait((time.monotonic() + self.delay_s, chunk))
        except OSError:
            pass
        finally:
            queue.put_nowait((time.monotonic() + self.delay_s, b""))  # EOF, after the data
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await sender

    async def _send(
        self, queue: asyncio.Queue[tuple[float, bytes]], dst: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                due, chunk = await queue.get()
                if (left := due - time.monotonic()) > 0:
                    await asyncio.sleep(left)
                if not chunk:
                    break
                dst.write(chunk)
                await dst.drain()
        finally:
            await _close(dst)


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await writer.wait_closed()
