"""A typed client of the HTTP API (docs/operations.md lists the routes it uses).

Errors come back as two typed exceptions with one sentence each: ``ApiError`` when the API
answered with an error body, ``ApiUnreachable`` when no answer came at all.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from hbgw.core.errors import HbgwError

DEFAULT_TIMEOUT = 10.0
UNAUTHORIZED = 401

Rediscover = Callable[[], "tuple[str, str] | None"]
"""Where the API is now, and its token (None: unknown); asked after a refusal or no answer."""
PAGE = 200  # the API's largest page


class ApiError(HbgwError):
    """The API answered with an error; the message is its sentence."""

    def __init__(self, message: str = "", *, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        # A request the caller can fix (unknown session, bad token) is bad input; the rest is not.
        self.exit_code = 2 if 400 <= status < 500 else 1


class ApiUnreachable(HbgwError):
    """No answer came from the API (refused, timed out, dropped)."""


@dataclass(frozen=True)
class ChatMessage:
    id: int
    session_id: str
    role: str
    kind: str
    text: str
    heartbeat: bool
    silent: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatMessage:
        return cls(
            id=int(data["id"]),
            session_id=str(data["session_id"]),
            role=str(data["role"]),
            kind=str(data["kind"]),
            text=str(data["text"]),
            heartbeat=bool(data.get("heartbeat", False)),
            silent=bool(data.get("silent", False)),
        )


@dataclass(frozen=True)
class CommandReply:
    """A slash command's answer: ``ok`` False when the reply is an error sentence."""

    session_id: str
    ok: bool
    reply: str


@dataclass(frozen=True)
class MessageAccepted:
    """Plain text stored for a turn; the reply arrives later, on the events stream."""

    session_id: str
    message_id: int
    duplicate: bool
    handed_off: bool


def error_from(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
        error = body["error"]
        return ApiError(str(error["message"]), status=response.status_code, code=str(error["code"]))
    except (ValueError, KeyError, TypeError):
        text = " ".join(response.text.split())[:200] or response.reason_phrase
        sentence = f"The API answered {response.status_code}: {text}."
        return ApiError(sentence, status=response.status_code, code="http")


def unreachable(url: str, exc: Exception) -> ApiUnreachable:
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return ApiUnreachable(f"Cannot reach the API at {url} ({detail}) — is `hbgw up` running?")


class ApiClient:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        rediscover: Rediscover | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._rediscover = rediscover
        self._lock = threading.Lock()
        self._http = self.new_http()
        self._http_for = (self.url, self.token)

    def new_http(self, *, read_timeout: float | None = None) -> httpx.Client:
        """An httpx client for this API as now known (the events stream makes its own)."""
        timeout = httpx.Timeout(self.timeout, read=read_timeout or self.timeout)
        with self._lock:
            url, token = self.url, self.token
        return httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )

    def rediscover(self) -> bool:
        """Look the API up again (`hbgw up` restarted: a new token, maybe a new port); True
        when its address or token changed."""
        found = self._rediscover() if self._rediscover else None
        if not found:
            return False
        url, token = found[0].rstrip("/"), found[1]
        with self._lock:
            if (url, token) == (self.url, self.token):
                return False
            self.url, self.token = url, token
        return True

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self._request_once(method, path, **kwargs)
        except (ApiUnreachable, ApiError) as exc:
            refused = isinstance(exc, ApiError) and exc.status == UNAUTHORIZED
            if not (refused or isinstance(exc, ApiUnreachable)) or not self.rediscover():
                raise
        return self._request_once(method, path, **kwargs)

    def _request_once(self, method: str, path: str, **kwargs: Any) -> Any:
        if self._http_for != (self.url, self.token):
            self._http.close()
            self._http = self.new_http()
            self._http_for = (self.url, self.token)
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        if response.status_code >= 400:
            raise error_from(response)
        return response.json()

    def create_session(self, platform: str, chat: str, thread: str | None = None) -> dict[str, Any]:
        body = {"platform": platform, "chat": chat, "thread": thread}
        return dict(self._request("POST", "/v1/sessions", json=body))

    def get_session(self, session_id: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/v1/sessions/{session_id}"))

    def send(
        self, session_id: str, text: str, *, key: str | None = None
    ) -> CommandReply | MessageAccepted:
        """Send ``text``; a dropped connection is retried once with the same Idempotency-Key."""
        headers = {"Idempotency-Key": key or str(uuid.uuid4())}
        path = f"/v1/sessions/{session_id}/messages"
        try:
            body = self._request("POST", path, json={"text": text}, headers=headers)
        except ApiUnreachable:
            # The first POST may have been stored before the connection dropped: the same key
            # makes the retry return that message instead of storing a second one.
            body = self._request("POST", path, json={"text": text}, headers=headers)
        if body.get("kind") == "command":
            return CommandReply(str(body["session_id"]), bool(body["ok"]), str(body["reply"]))
        return MessageAccepted(
            session_id=str(body["session_id"]),
            message_id=int(body["message_id"]),
            duplicate=bool(body.get("duplicate", False)),
            handed_off=bool(body.get("handed_off", False)),
        )

    def messages(
        self, session_id: str, *, after: int | None = None, limit: int = 50
    ) -> tuple[list[ChatMessage], int | None]:
        """One page, ascending by id, and the ``after`` of the next page (None at the end)."""
        params: dict[str, int] = {"limit": limit}
        if after is not None:
            params["after"] = after
        body = self._request("GET", f"/v1/sessions/{session_id}/messages", params=params)
        page = [ChatMessage.from_json(m) for m in body["messages"]]
        following = body.get("next_after")
        return page, None if following is None else int(following)

    def history(self, session_id: str, *, last: int = 20, page: int = PAGE) -> list[ChatMessage]:
        """The newest ``last`` messages, oldest first (the API pages forward only)."""
        kept: list[ChatMessage] = []
        after: int | None = None
        while True:
            chunk, after = self.messages(session_id, after=after, limit=page)
            kept = (kept + chunk)[-last:] if last > 0 else []
            if after is None or not chunk:
                return kept
