"""Every error the API answers is ``{"error": {"code", "message"}}``: a stable code, one sentence.

Codes: ``unauthorized`` (401), ``forbidden`` (403: a platform's workspace not allowed),
``not_found`` and ``no_heartbeat`` (404), ``method_not_allowed`` (405), ``request_timeout``
(408), ``invalid_state`` (409), ``payload_too_large`` (413), ``invalid_input`` (422; 400 for a
signed platform body of the wrong shape), ``quota_exceeded`` and ``rate_limited`` (429, with
``Retry-After``), ``unavailable`` (503: the database or Redis is away), ``internal`` (500,
never expected).

A 5xx answers a fixed sentence and a ``reference`` and nothing of the failure itself: a store
error names the database's host, port and role and quotes the server, which is for operators.
The log has the detail under the same reference (``failure_answer``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from kombu.exceptions import KombuError
from starlette.exceptions import HTTPException

from hbgw.core.errors import BadInput, HbgwError, InvalidState, NotFound, QuotaExceeded, StoreError

log = logging.getLogger("hbgw.api")

STORE_AWAY = "The store is unavailable; try again shortly."
REDIS_AWAY = "Redis is not reachable right now; try again in a moment."
UNEXPECTED = "The server failed unexpectedly."


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def error_body(code: str, message: str, reference: str | None = None) -> dict[str, Any]:
    detail = {"code": code, "message": message}
    if reference is not None:
        detail["reference"] = reference
    return {"error": detail}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def failure_answer(
    status: int, code: str, sentence: str, exc: BaseException, *, action: str
) -> JSONResponse:
    """A server-side failure: the caller gets ``sentence`` and a reference, the log gets the
    exception (host, port, role, the server's words) under that reference."""
    reference = secrets.token_hex(6)
    log.log(
        logging.ERROR if status == 500 else logging.WARNING,
        "request failed (reference %s): %s: %s",
        reference,
        type(exc).__name__,
        exc,
        exc_info=exc if status == 500 else None,
        extra={"action": action, "reference": reference},
    )
    body = error_body(code, f"{sentence} Reference: {reference}.", reference)
    return JSONResponse(body, status_code=status)


def not_found(session_id: str) -> ApiError:
    """The one answer for a missing session and for another owner's: ids cannot be probed."""
    return ApiError(404, "not_found", f"There is no session {session_id}.")


def classify(exc: HbgwError) -> tuple[int, str]:
    """The status and code of one of the project's own errors."""
    if isinstance(exc, NotFound):
        return 404, "not_found"
    if isinstance(exc, InvalidState):
        return 409, "invalid_state"
    if isinstance(exc, QuotaExceeded):
        return 429, "quota_exceeded"
    if isinstance(exc, BadInput):
        return 422, "invalid_input"
    if isinstance(exc, StoreError):
        return 503, "unavailable"
    return 500, "internal"


def command_error_code(exc: BadInput) -> str:
    """The code of a command's refusal, answered as its reply (200, ``ok`` false)."""
    if isinstance(exc, (NotFound, InvalidState, QuotaExceeded)):
        return classify(exc)[1]
    return "invalid_input"


def validation_sentence(errors: Sequence[Any]) -> str:
    """One sentence for pydantic's first complaint about a request."""
    if not errors:
        return "The request is not valid."
    first = errors[0]
    loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "header")]
    field = ".".join(loc)
    kind = first.get("type", "")
    if kind == "json_invalid":
        return "The request body is not valid JSON; send a JSON object."
    if kind == "extra_forbidden":
        return f"The field '{field}' is not accepted here; remove it."
    if kind == "missing":
        return f"The field '{field}' is required." if field else "A JSON request body is required."
    if not field:
        return "The request body must be a JSON object."
    msg = str(first.get("msg", "is not valid")).rstrip(".")
    return f"The field '{field}' is not valid: {msg}."


def install(app: FastAPI) -> None:
    """Turn every failure into the JSON error shape."""

    async def api_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def own_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HbgwError)
        status, code = classify(exc)
        if status == 503:
            return failure_answer(503, code, STORE_AWAY, exc, action="api.unavailable")
        if status >= 500:
            return failure_answer(status, code, UNEXPECTED, exc, action="api.failed")
        return error_response(status, code, str(exc))

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(422, "invalid_input", validation_sentence(exc.errors()))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            sentence = f"{request.method} is not allowed on {request.url.path}."
            return error_response(405, "method_not_allowed", sentence)
        if exc.status_code == 404:
            return error_response(404, "not_found", f"There is no route {request.url.path}.")
        return error_response(exc.status_code, "invalid_input", str(exc.detail))

    async def unavailable(_request: Request, exc: Exception) -> JSONResponse:
        return failure_answer(503, "unavailable", REDIS_AWAY, exc, action="api.unavailable")

    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        return failure_answer(500, "internal", UNEXPECTED, exc, action="api.internal")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(HbgwError, own_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    for kind in (redis.RedisError, KombuError, OSError):
        app.add_exception_handler(kind, unavailable)
    app.add_exception_handler(Exception, internal)
