"""Deliver to Discord with its REST API: ``POST /channels/{id}/messages`` into the session's
channel, or its thread (a thread is a channel of its own in Discord) — never a DM instead.

* Long text is split at ``SPLIT_AT`` (2,000, Discord's limit for a message's content) at a
  paragraph, line or word break (``split.py``); the parts go out in order, into the same place.
* ``allowed_mentions: {"parse": []}``: an agent's text that says ``@everyone`` or ``<@id>``
  shows it, and pings nobody.
* Each part carries a ``nonce`` made from the delivery key, with ``enforce_nonce``: Discord
  returns the message already created with that nonce (within a few minutes) instead of a
  second one, so a send repeated after a timeout does not post twice. The nonce is keyed (an
  HMAC under the bot's token): a plain hash of ``msg:<id>`` would give SQL's sequential
  message id to anyone who tried the small numbers.
* ``typing`` is ``POST /channels/{id}/typing`` (workers call it on user turns only, never during
  a heartbeat turn); skipped, not waited for, when its rate limit is spent. ``progress`` shows
  nothing: drafts would be messages.
* Rate limits and typed failures: ``rest.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

from hbgw.core.clock import pause
from hbgw.core.settings import Settings
from hbgw.gateway.platforms.discord.rest import (
    DEFAULT_API,
    DiscordRest,
    Route,
    body_of,
    channel_segment,
)
from hbgw.gateway.platforms.split import split_text
from hbgw.workers.ports import Address, Receipt, SendGuard

PLATFORM = "discord"
SPLIT_AT = 2000
NO_PINGS: dict[str, Any] = {"parse": []}
NONCE_LENGTH = 25  # Discord's limit for a nonce


def nonce(key: bytes, delivery_key: str, part: int) -> str:
    """The same for every attempt at one part of one message, 25 characters at most, and
    nothing anyone without ``key`` can compute from a delivery key."""
    digest = hmac.new(key, f"{delivery_key}\x1f{part}".encode(), hashlib.sha256).hexdigest()
    return digest[:NONCE_LENGTH]


def target(address: Address) -> str:
    """Where a message goes: the thread's own channel id, else the channel's."""
    return address.thread or address.chat


def messages_route(channel_id: str) -> Route:
    path = f"/channels/{channel_segment(channel_id)}/messages"
    return Route("POST", "POST /channels/{id}/messages", channel_id, path)


def typing_route(channel_id: str) -> Route:
    path = f"/channels/{channel_segment(channel_id)}/typing"
    return Route("POST", "POST /channels/{id}/typing", channel_id, path)


class DiscordChannel:
    name = PLATFORM

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API,
        timeout: float = 10.0,
        sleep: Callable[[float], None] = pause,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rest = DiscordRest(
            token, base_url=base_url, timeout=timeout, sleep=sleep, monotonic=monotonic
        )
        self.nonce_key = token.encode()

    @classmethod
    def from_settings(cls, settings: Settings) -> DiscordChannel:
        token = settings.discord_bot_token
        assert token is not None  # built only when Discord is configured
        return cls(
            token.get_secret_value(),
            base_url=settings.discord_api_url,
            timeout=settings.discord_timeout,
        )

    def close(self) -> None:
        self.rest.close()

    def send(
        self,
        address: Address,
        text: str,
        *,
        session_id: str,
        kind: str,
        delivery_key: str,
        possible_repeat: bool = False,
        ref: str | None = None,
        guard: SendGuard | None = None,
    ) -> Receipt:
        """Post ``text`` (in parts when long) into the address's thread or channel; the
        receipt names the first part's message id, where a reader sees the reply start."""
        first: str | None = None
        channel_id = target(address)
        for n, part in enumerate(split_text(text, SPLIT_AT)):
            if n and guard is not None:
                guard()  # the next part: the lock confirmed afresh
            answer = self.post(channel_id, part, nonce(self.nonce_key, delivery_key, n), guard)
            if first is None and answer.get("id") is not None:
                first = str(answer["id"])
        return Receipt(message_id=first)

    def post(
        self, channel_id: str, content: str, nonce: str, guard: SendGuard | None = None
    ) -> dict[str, Any]:
        """One message; Discord's answer (the message), or a typed ``DeliveryFailed``."""
        body = {
            "content": content,
            "allowed_mentions": NO_PINGS,
            "nonce": nonce,
            "enforce_nonce": True,
        }
        response = self.rest.call(messages_route(channel_id), body, guard=guard)
        assert response is not None  # a patient call is made or raises
        return body_of(response)

    def typing(self, address: Address, *, session_id: str) -> None:
        # Cosmetic: one attempt, and none at all while the bucket is empty.
        self.rest.call(typing_route(target(address)), patient=False, retries=0)

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        return None
