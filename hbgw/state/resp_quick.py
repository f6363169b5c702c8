"""A minimal Redis client (RESP2 over one socket) for `hbgw stamp` only, which a coding agent's
hook runs on every tool call: redis-py's import alone (~0.11 s: its package loads its asyncio
client too) was more than the rest of a stamp. No other command uses it.

It speaks the URLs redis-py reads the same way for one plain server: ``redis://``,
``rediss://`` and ``unix://``, with a username and password, a ``/db`` (or ``?db=``), and for
TLS ``?ssl_cert_reqs=required`` and ``?ssl_ca_certs=`` (which, as in redis-py, wins over
HBGW_REDIS_TLS_CA). It connects, AUTHs, SELECTs and PINGs as redis-py's ``connect`` and the
CLI's ``reachable_redis`` do, with the same timeouts (``redis_url.timeouts``) and the same
certificate checks (``redis_tls.tls_options``). A cluster or Sentinel URL, another scheme or
another URL option raises ``NotQuick``: the caller uses redis-py. Past the handshake it sends
TIME and the stamp's HSET, built by the class the processes use (``Liveness.stamp_command``).
tests/integration/test_resp_quick.py gives both clients the same URLs, servers and commands and
compares what they reach, refuse and store.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from hbgw.state.redis_url import timeouts

if TYPE_CHECKING:
    import ssl

    from hbgw.core.settings_quick import RedisSettings

Command = tuple[str | int, ...]
SCHEMES = ("redis://", "rediss://", "unix://")  # redis-py's parse_url: lower case only
OPTIONS = frozenset({"db", "ssl_cert_reqs", "ssl_ca_certs"})
DEFAULT_PORT = 6379


class NotQuick(Exception):
    """A URL this client does not read exactly as redis-py would: use redis-py."""


class QuickRedisError(Exception):
    """Redis answered with an error (``-ERR …``, ``-WRONGPASS …``) or broke the protocol."""


class QuickRedis:
    """One connection; commands are sent as given and their replies read in order."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")

    def execute_command(self, *args: str | int) -> Any:
        return self.send_all([args])[0]

    def send_all(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` in one write, then read their replies; the first error raises."""
        self._sock.sendall(b"".join(encode(c) for c in commands))
        replies = [self._reply() for _ in commands]
        for reply in replies:
            if isinstance(reply, QuickRedisError):
                raise reply
        return replies

    def time(self) -> tuple[int, int]:
        """``TIME``: seconds and microseconds, as redis-py's ``Redis.time`` returns them."""
        seconds, micros = self.execute_command("TIME")
        return int(seconds), int(micros)

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def _reply(self) -> Any:
        line = self._file.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return QuickRedisError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self._file.read(size + 2)
            if len(data) != size + 2:
                raise ConnectionError("Redis closed the connection")
            return data[:-2].decode()
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self._reply() for _ in range(size)]
        raise QuickRedisError(f"not a RESP2 reply: {line[:40]!r}")


def encode(command: Command) -> bytes:
    """A command as RESP2 bytes; strings UTF-8, as redis-py encodes them."""
    parts = [str(a).encode() for a in command]
    head = b"*%d\r\n" % len(parts)
    return head + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def connect_quick(url: str, settings: RedisSettings | None) -> QuickRedis:
    """A connection to ``url``, authenticated, on its database, that answered PING; OSError or
    ``QuickRedisError`` when Redis does not answer, ``NotQuick`` when redis-py must (see above).
    A ``rediss://`` URL that turns checks off, or a TLS file that is not there, raises the
    ``BadInput`` that redis-py's path raises."""
    if not url.startswith(SCHEMES):
        raise NotQuick(url)
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items() if v}
    if not set(query) <= OPTIONS:
        raise NotQuick(url)
    context = _tls(url, settings, query) if parts.scheme == "rediss" else None
    client = QuickRedis(_socket(parts, context))
    try:
        client.send_all(_hello(parts, query))
    except BaseException:
        client.close()
        raise
    return client


def _hello(parts: Any, query: dict[str, str]) -> list[Command]:
    """AUTH, SELECT and PING, in the order redis-py sends them."""
    commands: list[Command] = []
    username, password = unquote(parts.username or ""), unquote(parts.password or "")
    if username or password:
        commands.append(("AUTH", username, password) if username else ("AUTH", password))
    db = _db(parts, query)
    if db:
        commands.append(("SELECT", db))
    return [*commands, ("PING",)]


def _db(parts: Any, query: dict[str, str]) -> int:
    try:
        if "db" in query:
            return int(query["db"])
        if parts.scheme != "unix" and parts.path:
            return int(unquote(parts.path).replace("/", ""))
    except ValueError:
        if "db" in query:
            raise NotQuick("db") from None  # redis-py refuses it in its own words
    return 0


def _socket(parts: Any, context: ssl.SSLContext | None) -> socket.socket:
    read_timeout, connect_timeout = timeouts(None)  # as ``connection.connect`` for the CLI
    if parts.scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(connect_timeout)
            sock.connect(unquote(parts.path))
        except BaseException:
            sock.close()
            raise
    else:
        host = unquote(parts.hostname or "localhost")
        sock = socket.create_connection((host, parts.port or DEFAULT_PORT), connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context is not None:
            try:
                sock = context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
    sock.settimeout(read_timeout)
    return sock


def _tls(url: str, settings: RedisSettings | None, query: dict[str, str]) -> ssl.SSLContext:
    """A context that verifies the server as redis-py's ``SSLConnection`` does with the options
    ``tls_options`` gives it (and refuses what it refuses)."""
    import ssl

    from hbgw.state.redis_tls import tls_options

    options = {**tls_options(settings, url), **query}  # URL options win, as in redis-py
    context = ssl.create_default_context()
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if options.get("ssl_ca_certs"):
        context.load_verify_locations(cafile=options["ssl_ca_certs"])
    if options.get("ssl_certfile"):
        context.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"))
    return context
