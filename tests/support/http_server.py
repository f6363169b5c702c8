"""Serve an ASGI app with a real uvicorn server on a loopback port, in a thread."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from support.harness import wait_until


@contextmanager
def serving(app: Any, *, host: str = "127.0.0.1", timeout: float = 30.0) -> Iterator[str]:
    """Yield the server's base URL (``http://127.0.0.1:PORT``); stop it on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))  # the port is ours before uvicorn starts: no race for a free port
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=timeout)
        if not server.started:
            raise RuntimeError("uvicorn did not start; its log above says why")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
