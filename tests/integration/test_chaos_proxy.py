"""The chaos harness's own Redis proxy (``redis_hang``), against a real Redis: it really hangs
on open connections, then slows, then forwards, and stops when asked."""

from __future__ import annotations

import time

import redis

from chaos.proxy import RedisProxy


def test_the_proxy_hangs_without_closing_then_slows_then_forwards(redis_url: str) -> None:
    """redis_hang's proxy: a command sent while hung waits the hang out on an open connection
    (no error, nothing lost), then answers slowly, then at once; the proxy stops when asked."""
    upstream = redis.Redis.from_url(redis_url)
    port = int(upstream.connection_pool.connection_kwargs["port"])
    upstream.close()
    proxy = RedisProxy(port, lifetime=30)
    client = redis.Redis.from_url(proxy.start(), socket_timeout=10)
    try:
        assert client.ping()
        proxy.hang(0.6, 0.5, 0.1)
        began = time.monotonic()
        assert client.ping()  # held, then forwarded: the connection was never closed
        assert time.monotonic() - began >= 0.6
        assert proxy.stats.held_chunks >= 1 and proxy.stats.open_during_hang == 1
        while time.monotonic() - began < 1.1:
            client.ping()
        assert proxy.stats.delayed_chunks >= 1
        proxy.heal()
        assert proxy.stats.connections == 1
    finally:
        client.close()
        proxy.stop()
    assert proxy._thread is not None and not proxy._thread.is_alive()
