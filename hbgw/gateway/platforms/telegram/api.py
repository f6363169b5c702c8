"""Telegram's Bot API over httpx: ``POST {HBGW_TELEGRAM_API_URL}/bot<token>/<method>`` with a
JSON body, answered ``{"ok": true, "result": …}`` or ``{"ok": false, "error_code": …,
"description": …, "parameters": {"retry_after": …}}``.

Why httpx and not python-telegram-bot (or aiogram): their clients are asyncio-only, and the
workers' channel is synchronous — a turn runs in a runner thread and its send blocks it, by
design (``workers/ports.py``). Driving an event loop per send, or one in a side thread, would add
a second concurrency model for four documented HTTP methods (sendMessage, sendChatAction,
setWebhook, getUpdates). httpx is already the project's HTTP client; the Bot API is plain JSON.

* A 429 proves nothing was done, so it is the one answer repeated here: after its
  ``parameters.retry_after``, at most ``RATE_LIMIT_RETRIES`` times and only when the wait is at
  most ``MAX_RETRY_AFTER`` seconds (a send holds its turn's thread and session lock). A timeout or
  a dropped connection may have posted, and is left to the caller.
* The token is part of every URL: no error raised here carries a URL, and any text that could
  is stripped of the token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from hbgw.core.clock import pause

RATE_LIMIT_RETRIES = 3
MAX_RETRY_AFTER = 30.0


@dataclass  # not frozen: raising an exception sets its __traceback__
class Refused(Exception):
    """Telegram answered ``ok: false``: its HTTP status, its description, and what it asked."""

    method: str
    status: int
    description: str
    retry_after: float | None = None
    migrate_to: int | None = None

    def __str__(self) -> str:
        return f"{self.method}: HTTP {self.status}: {self.description}"


class Unreachable(Exception):
    """No answer (timeout, connection refused or reset): the call may or may not have run."""


class BotApi:
    def __init__(
        self,
        token: str,
        *,
        base_url: str = "https://api.telegram.org",
        timeout: float = 10.0,
        sleep: Callable[[float], None] = pause,
    ) -> None:
        self.token = token
        self.base = f"{base_url.rstrip('/')}/bot{token}/"
        self.timeout = timeout
        self.sleep = sleep
        # No idle connection is kept: a channel lives as long as its process and nothing closes
        # it, and a pooled socket left for the collector would be a leak (and a warning).
        self.http = httpx.Client(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=0))

    @property
    def bot_id(self) -> str:
        """The bot's user id: the part of its token before the colon (public, not a secret)."""
        return self.token.partition(":")[0]

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        patient: bool = True,
        wait: float = 0.0,
        guard: Callable[[], None] | None = None,
    ) -> Any:
        """``method``'s result. ``patient``: wait out 429s (bounded); ``wait``: extra seconds
        the answer may take (getUpdates' long poll); ``guard``: called after a 429's wait,
        before the request is made again (``workers.ports.SendGuard``)."""
        retries = RATE_LIMIT_RETRIES if patient else 0
        while True:
            try:
                return self._once(method, params, wait)
            except Refused as refused:
                delay = refused.retry_after
                if refused.status != 429 or retries <= 0 or delay is None:
                    raise
                if delay > MAX_RETRY_AFTER:
                    raise
                retries -= 1
                self.sleep(delay)
                if guard is not None:
                    guard()

    def _once(self, method: str, params: dict[str, Any], wait: float) -> Any:
        body = {k: v for k, v in params.items() if v is not None}
        try:
            answer = self.http.post(self.base + method, json=body, timeout=self.timeout + wait)
        except httpx.HTTPError as exc:
            raise Unreachable(self.scrub(f"{type(exc).__name__}: {exc}")) from None
        try:
            payload = answer.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise Refused(
                method, answer.status_code, f"not a Bot API answer (HTTP {answer.status_code})"
            )
        if payload.get("ok") is True:
            return payload.get("result")
        raise refusal(method, answer.status_code, payload, self.scrub)

    def scrub(self, text: str) -> str:
        return text.replace(self.token, "<token>") if self.token else text

    def close(self) -> None:
        self.http.close()


def refusal(
    method: str, status: int, payload: dict[str, Any], scrub: Callable[[str], str]
) -> Refused:
    parameters = payload.get("parameters")
    parameters = parameters if isinstance(parameters, dict) else {}
    retry_after = parameters.get("retry_after")
    migrate_to = parameters.get("migrate_to_chat_id")
    code = payload.get("error_code")
    return Refused(
        method,
        code if isinstance(code, int) and code >= 400 else status,
        scrub(str(payload.get("description") or f"HTTP {status}")),
        float(retry_after) if isinstance(retry_after, int | float) else None,
        migrate_to if isinstance(migrate_to, int) else None,
    )
