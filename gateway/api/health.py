"""``/healthz`` (the process answers) and ``/readyz`` (database, Redis and schema are ready).

Neither needs a token: a load balancer or Kubernetes probe asks them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from core.errors import HbgwError
from gateway.api.context import context
from gateway.api.schemas import Health, Readiness
from sessions.db import current_revision, head_revision
from state.connection import TRANSIENT_REDIS_ERRORS

router = APIRouter(tags=["health"])

NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {"model": Readiness, "description": "Not ready; the failing check says why."}
}


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness, responses=NOT_READY)
def readyz(request: Request) -> JSONResponse:
    """The database answers, its schema is this version's, and Redis answers."""
    ctx = context(request)
    checks = {"database": "ok", "schema": "ok", "redis": "ok"}
    try:
        current = current_revision(ctx.store.engine)
        head = head_revision(ctx.store.engine)
        if current != head:
            checks["schema"] = (
                f"The schema is at {current or 'nothing'} but this version needs {head}; "
                "run `hbgw migrate`."
            )
    except HbgwError as exc:
        checks["database"] = str(exc)
        checks["schema"] = "Unknown: the database did not answer."
    checks["redis"] = _redis_check(ctx)
    ready = all(v == "ok" for v in checks.values())
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


def _redis_check(ctx: Any) -> str:
    if ctx.rt is None:
        return "No Redis is configured; set HBGW_REDIS_URL."
    try:
        ctx.rt.client.ping()
    except TRANSIENT_REDIS_ERRORS as exc:
        return f"Redis does not answer: {exc.__class__.__name__}."
    return "ok"
