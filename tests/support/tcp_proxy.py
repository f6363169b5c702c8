"""A loopback TCP proxy that drops connections on demand: network failures, on real sockets.

``cut()`` closes every open connection (a stream dropped mid-way); ``swallow(n)`` drops the next
``n`` answers of the server with their connection (the client cannot know whether
its request was applied); ``hang()`` stops forwarding in both directions while every connection
stays open (no reset, no FIN: a hung network path, new connections included) until ``resume()``,
which forwards what waited, late — as TCP would once the path heals. Any TCP protocol: the
answer-swallowing looks for HTTP status lines only.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._swallow = 0
        self.connections = 0
        self._closed = False
        self._flowing = threading.Event()
        self._flowing.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def swallow(self, count: int) -> None:
        with self._lock:
            self._swallow = count

    def hang(self) -> None:
        """Stop forwarding; keep every socket open (what arrives waits in the proxy)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def cut(self) -> None:
        with self._lock:
            doomed, self._open = self._open, []
        for sock in doomed:
            _close(sock)

    def close(self) -> None:
        self._closed = True
        self._flowing.set()  # a hung pump wakes, finds its sockets closed and ends
        _close(self._listener)
        self.cut()

    def serve(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open += [client, upstream]
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while chunk := source.recv(65536):
                # A chunk that starts with a status line starts an answer (an open event
                # stream's later chunks do not).
                if answers and chunk.startswith(b"HTTP/") and self._take_swallow():
                    break
                self._flowing.wait()
                sink.sendall(chunk)
        except OSError:
            pass
        _close(source)
        _close(sink)

    def _take_swallow(self) -> bool:
        with self._lock:
            if self._swallow <= 0:
                return False
            self._swallow -= 1
            return True


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def tcp_proxy(host: str, port: int) -> Iterator[TcpProxy]:
    """A proxy in front of any TCP server (Redis, PostgreSQL) on ``host:port``."""
    proxy = TcpProxy((host, port))
    proxy.serve()
    try:
        yield proxy
    finally:
        proxy.close()


@contextmanager
def proxy_to(url: str) -> Iterator[TcpProxy]:
    """A proxy in front of ``http://HOST:PORT``; yields it with its own loopback URL."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    proxy = TcpProxy((host, int(port)))
    proxy.serve()
    try:
        yield proxy
    finally:
        proxy.close()
