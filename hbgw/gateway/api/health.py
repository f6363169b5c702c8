"""``/healthz`` (the process answers) and ``/readyz`` (database, Redis and schema are ready).

Neither needs a token: a load balancer or Kubernetes probe asks them. Without the admin
token ``/readyz`` answers a bare status: the checks' sentences name the database's user, host,
port and name and quote the server's errors, which are for operators only.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials

from hbgw.core.errors import HbgwError
from hbgw.gateway.api.context import ApiContext, bearer, context
from hbgw.gateway.api.schemas import Health, Readiness
from hbgw.sessions.db import current_revision, head_revision
from hbgw.state.connection import TRANSIENT_REDIS_ERRORS

router = APIRouter(tags=["health"])

NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {"model": Readiness, "description": "Not ready; the failing check says why."}
}


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness, responses=NOT_READY)
def readyz(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> JSONResponse:
    """The database answers, its schema is this version's, and Redis answers; each check's
    sentence only for the admin token."""
    ctx = context(request)
    checks = _checks(ctx)
    ready = all(v == "ok" for v in checks.values())
    body: dict[str, Any] = {"status": "ready" if ready else "not_ready"}
    if _is_admin(ctx, credentials):
        body["checks"] = checks
    return JSONResponse(body, status_code=200 if ready else 503)


def _is_admin(ctx: ApiContext, credentials: HTTPAuthorizationCredentials | None) -> bool:
    if credentials is None:
        return False
    found = ctx.tokens.lookup(credentials.credentials)
    return found is not None and found.admin


def _checks(ctx: ApiContext) -> dict[str, str]:
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
    return checks


def _redis_check(ctx: ApiContext) -> str:
    if ctx.rt is None:
        return "No Redis is configured; set HBGW_REDIS_URL."
    try:
        ctx.rt.client.ping()
    except TRANSIENT_REDIS_ERRORS as exc:
        return f"Redis does not answer: {exc.__class__.__name__}."
    return "ok"
