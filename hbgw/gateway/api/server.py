"""Running the API under uvicorn so that a shutdown does not wait on open event streams."""

from __future__ import annotations

import socket
from typing import Any

import uvicorn
from fastapi import FastAPI

from hbgw.gateway.api.app import api_context
from hbgw.gateway.api.slow_clients import slow_client_protocol

# Seconds uvicorn waits for requests still running at shutdown before it cancels them.
GRACE = 5


class ApiServer(uvicorn.Server):
    """Tells the app's event streams to end as soon as the shutdown begins: uvicorn waits for
    running responses, and a stream would otherwise run until the grace period ran out."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self.api = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        api_context(self.api).stop_streams()
        await super().shutdown(sockets)


def api_server(app: FastAPI, host: str, port: int, **options: Any) -> ApiServer:
    """Slow clients are cut off: HBGW_API_READ_TIMEOUT for headers (``slow_clients``) and for
    the body (``limits.BodyLimit``), HBGW_API_KEEP_ALIVE for an idle connection."""
    settings = api_context(app).settings
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        http=slow_client_protocol(settings.api_read_timeout),
        timeout_keep_alive=settings.api_keep_alive,
        timeout_graceful_shutdown=GRACE,
        log_config=None,  # our logging (hbgw/core/logs.py) formats uvicorn's lines too
        **options,
    )
    return ApiServer(config, app)
