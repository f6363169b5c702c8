"""An httpx transport that opens connections only to addresses ``OutboundGuard`` allows.

httpcore opens every TCP connection through its network backend's ``connect_tcp(host, port)``;
``GuardedBackend`` resolves the host itself, checks each address and connects to an allowed
one by its address, so what is checked is what is connected to, on every new connection (a
name that re-resolves inside later is refused then). TLS is started afterwards by httpcore with
the URL's host as the server name (SNI, certificate check), and the request keeps its ``Host``
header: only the TCP connection is pinned. A client built on this transport takes no proxy from
the environment (httpx reads proxies only when no transport is handed in), so nothing goes
around the check.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpcore
import httpx

from hbgw.core.errors import OutboundRefused
from hbgw.core.outbound import OutboundGuard

# httpx's own defaults for one transport's pool (httpx.HTTPTransport).
MAX_CONNECTIONS = 100
MAX_KEEPALIVE = 20
KEEPALIVE_EXPIRY = 5.0


class GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, guard: OutboundGuard, inner: httpcore.NetworkBackend | None = None) -> None:
        self.guard = guard
        self.inner = inner if inner is not None else httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.guard.addresses(host, port)
        except (OSError, UnicodeError) as exc:  # the name did not resolve: as httpcore says it
            raise httpcore.ConnectError(str(exc)) from exc
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:  # the next address of the name may answer
                failure = exc
        assert failure is not None  # addresses() returns at least one or raises
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise OutboundRefused("Outbound webhooks do not connect to local sockets.")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def guarded_transport(guard: OutboundGuard) -> httpx.HTTPTransport:
    """httpx's transport with its connection pool opening connections through ``guard``."""
    transport = httpx.HTTPTransport()
    # httpx hands no network backend through; the pool is the documented httpcore one, built
    # as httpx builds it (its certificate checks included) with the guarded backend.
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=MAX_CONNECTIONS,
        max_keepalive_connections=MAX_KEEPALIVE,
        keepalive_expiry=KEEPALIVE_EXPIRY,
        network_backend=GuardedBackend(guard),
    )
    return transport
