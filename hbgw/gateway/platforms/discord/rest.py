"""Discord's REST API over httpx: ``Authorization: Bot <token>``, the User-Agent Discord asks
for, its rate limits honoured, its refusals typed.

Discord publishes no official Python client; the REST API is documented and versioned
(``/api/v10``), so a thin httpx layer is the dependable choice — the community libraries are
built around the Gateway websocket this deployment does not hold.

* Rate limits (``ratelimits.py``): an empty bucket is waited for before the request; a 429 is
  waited out for its ``retry_after`` (the JSON body's, seconds, a float; the ``Retry-After``
  header when the body says nothing) and sent again, at most ``RATE_LIMIT_RETRIES`` times and
  only when the wait is at most ``MAX_RETRY_AFTER`` seconds. A 429 proves nothing was done, so
  it is the only answer repeated here; a timeout may have posted, and is left to the caller.
* Failures are typed: ``PermanentDelivery`` when the route is gone (401 token, 403 Missing
  Access 50001 / Missing Permissions 50013, 404 Unknown Channel 10003, an archived or locked
  thread), ``TransientDelivery`` when later may work (429 past its retries, 5xx, timeouts, a
  refusal not known to be permanent).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import quote

import httpx

from hbgw.core.clock import pause
from hbgw.core.errors import DeliveryFailed, PermanentDelivery, TransientDelivery
from hbgw.gateway.platforms.discord.ratelimits import Buckets

PLATFORM = "discord"
DEFAULT_API = "https://discord.com/api/v10"
RATE_LIMIT_RETRIES = 3
MAX_RETRY_AFTER = 30.0
PROJECT_URL = "https://github.com/heartbeat-gateway/heartbeat-gateway"

# Discord's JSON error codes that no repeat can cure, with the words a person acts on.
PERMANENT_CODES = {
    10003: "unknown_channel",
    10008: "unknown_message",
    10015: "unknown_webhook",
    50001: "missing_access",
    50007: "cannot_message_user",
    50013: "missing_permissions",
    50083: "thread_archived",
    160005: "thread_locked",
}


def user_agent() -> str:
    """``DiscordBot ($url, $version)``: Discord refuses requests without a User-Agent of
    this form."""
    try:
        ours = version("heartbeat-gateway")
    except PackageNotFoundError:
        ours = "0"
    return f"DiscordBot ({PROJECT_URL}, {ours})"


def channel_segment(channel_id: str) -> str:
    """A channel or thread id as a path segment: a snowflake (digits only), or a permanent
    refusal before any request. Sessions are checked when they are made
    (``sessions/validation.py``); this holds for rows older than that check, so a stored
    chat like ``1/../../guilds/777/prune`` never steers a request that carries the bot token."""
    if not (channel_id.isascii() and channel_id.isdigit() and len(channel_id) <= 20):
        raise PermanentDelivery(
            f"The Discord channel id {channel_id[:40]!r} is not a snowflake (digits only); "
            "nothing was sent — make a new session in the channel.",
            platform=PLATFORM,
            reason="bad_channel_id",
        )
    return channel_id


def segment(value: str) -> str:
    """Any other value as one path segment: every character but letters, digits and ``-._~``
    percent-encoded, so a slash, a dot segment or a ``?`` cannot leave it."""
    return quote(value, safe="")


@dataclass(frozen=True)
class Route:
    """One REST call: ``template`` names its rate-limit route (``POST /channels/{id}/messages``),
    ``major`` its major parameter (the channel id), ``path`` the concrete path."""

    method: str
    template: str
    major: str
    path: str


class DiscordRest:
    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API,
        timeout: float = 10.0,
        sleep: Callable[[float], None] = pause,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.auth = {"Authorization": f"Bot {token}"}
        self.sleep = sleep
        self.buckets = Buckets(max_wait=MAX_RETRY_AFTER, sleep=sleep, monotonic=monotonic)
        # No connection outlives its request (as with slack_sdk): a channel lives as long as
        # its process and is never closed, and a send is rare next to a model call.
        self.client = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            headers={"User-Agent": user_agent()},
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def call(
        self,
        route: Route,
        body: Any = None,
        *,
        bot: bool = True,
        patient: bool = True,
        retries: int = RATE_LIMIT_RETRIES,
        guard: Callable[[], None] | None = None,
    ) -> httpx.Response | None:
        """Make the call; its answer, or a typed ``DeliveryFailed``. ``bot``: send the bot's
        token (an interaction's webhook is authorised by its own token, in the path).
        ``patient`` off: when the bucket is empty the call is skipped (None), not waited for.
        ``guard``: called after every wait, before the request (``workers.ports.SendGuard``)."""
        for attempt in range(retries + 1):
            if not self.buckets.wait_for(route.template, route.major, patient=patient, guard=guard):
                return None
            response = self._send(route, body, bot=bot)
            if response.status_code != 429:  # a 429's own wait is its retry_after, below
                self.buckets.learn(route.template, route.major, response.headers)
                if response.status_code >= 400:
                    raise classify(response)
                return response
            wait = retry_after(response)
            if attempt == retries or wait > MAX_RETRY_AFTER:
                break
            self.sleep(wait)
            if guard is not None:
                guard()
        raise TransientDelivery(
            "Discord is rate limiting this bot past the retries a send may wait for; it can be "
            "sent later.",
            platform=PLATFORM,
            reason="ratelimited",
        )

    def _send(self, route: Route, body: Any, *, bot: bool) -> httpx.Response:
        try:
            return self.client.request(
                route.method, route.path, json=body, headers=self.auth if bot else None
            )
        except httpx.HTTPError as exc:
            raise TransientDelivery(
                f"Discord did not answer ({type(exc).__name__}: {exc}); the message may not "
                "have been posted.",
                platform=PLATFORM,
                reason="unreachable",
            ) from exc

    def close(self) -> None:
        self.client.close()


def retry_after(response: httpx.Response) -> float:
    """Seconds Discord asked to wait: the body's ``retry_after``, else ``Retry-After``, else 1."""
    seconds = body_of(response).get("retry_after")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        return max(0.0, float(seconds))
    try:
        return max(0.0, float(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


def classify(response: httpx.Response) -> DeliveryFailed:
    """A Discord refusal as a permanent or transient failure, with a sentence that says which."""
    status = response.status_code
    body = body_of(response)
    code = body.get("code") if isinstance(body.get("code"), int) else None
    said = str(body.get("message") or f"HTTP {status}")[:200]
    word = PERMANENT_CODES.get(code or 0)
    if word is not None or status in (401, 403, 404):
        reason = word or f"http_{status}"
        return PermanentDelivery(
            f"Discord refused the message for good ({said}, {reason}): add the bot to the "
            "channel with View Channel and Send Messages (Send Messages in Threads for a "
            "thread), or check its token.",
            platform=PLATFORM,
            reason=reason,
        )
    return TransientDelivery(
        f"Discord did not take the message ({said}); it can be sent later.",
        platform=PLATFORM,
        reason=f"http_{status}",
    )


def body_of(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON object; empty when it is none (a 204, an HTML error page)."""
    try:
        found = response.json()
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
