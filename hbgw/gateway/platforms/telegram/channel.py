"""Deliver to Telegram with the Bot API's ``sendMessage`` (``api.py``): into the session's chat
and, for a forum topic, its ``message_thread_id`` — a new message, plain text, never a reply
quote, never to another chat, never a private message instead.

* Long text is split at ``SPLIT_AT`` (4,096, Telegram's limit for a message's text), at a
  paragraph, line or word break (``split.py``). Telegram counts UTF-16 code units, so a part
  with characters outside the Basic Multilingual Plane (most emoji) that passes the limit in
  those units is cut again; the parts go out in order, into the same chat and topic.
* A 429 is waited out for its ``retry_after`` (bounded, ``api.py``); a 429 past those retries
  fails transient.
* Failures are typed: ``PermanentDelivery`` when the route is gone (403: the bot was blocked,
  kicked or is not a member; 400: chat or topic not found, topic closed, no right to write,
  the group became a supergroup; 401/404: the token is wrong or revoked), with a reason code;
  ``TransientDelivery`` when sending later may work (429 past its retries, 5xx, timeouts,
  another 400).
* ``typing`` is ``sendChatAction(action="typing")``; workers show it on user turns only (a
  heartbeat turn passes no address). ``progress`` shows nothing: Telegram drafts would be
  messages.
"""

from __future__ import annotations

from collections.abc import Callable

from hbgw.core.clock import pause
from hbgw.core.errors import DeliveryFailed, PermanentDelivery, TransientDelivery
from hbgw.core.settings import Settings
from hbgw.gateway.platforms.split import split_text
from hbgw.gateway.platforms.telegram.api import BotApi, Refused, Unreachable
from hbgw.workers.ports import Address, Receipt, SendGuard

PLATFORM = "telegram"
SPLIT_AT = 4096

# (HTTP status, words of Telegram's description) → the reason a route is gone for good.
PERMANENT = (
    (403, "blocked by the user", "bot_blocked"),
    (403, "kicked", "bot_kicked"),
    (403, "not a member", "not_member"),
    (403, "deactivated", "user_deactivated"),
    (403, "can't initiate", "cannot_initiate"),
    (403, "", "forbidden"),
    (400, "chat not found", "chat_not_found"),
    (400, "message thread not found", "thread_not_found"),
    (400, "topic_closed", "topic_closed"),
    (400, "topic_deleted", "topic_deleted"),
    (400, "not enough rights", "no_rights"),
    (400, "have no rights", "no_rights"),
    (400, "chat_write_forbidden", "no_rights"),
    (400, "upgraded to a supergroup", "chat_migrated"),
    (401, "", "unauthorized"),
    (404, "", "not_found"),
)


class TelegramChannel:
    name = PLATFORM

    def __init__(
        self,
        token: str,
        *,
        base_url: str = "https://api.telegram.org",
        timeout: float = 10.0,
        sleep: Callable[[float], None] = pause,
    ) -> None:
        self.api = BotApi(token, base_url=base_url, timeout=timeout, sleep=sleep)

    def close(self) -> None:
        self.api.close()

    @classmethod
    def from_settings(
        cls, settings: Settings, *, sleep: Callable[[float], None] = pause
    ) -> TelegramChannel:
        token = settings.telegram_bot_token
        assert token is not None  # built only when Telegram is configured
        return cls(
            token.get_secret_value(),
            base_url=settings.telegram_api_url,
            timeout=settings.telegram_timeout,
            sleep=sleep,
        )

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
        """Send ``text`` (in parts when long) into the address's chat and topic; the receipt
        names the first part's ``message_id``, where a reader sees the reply start."""
        first: str | None = None
        for n, part in enumerate(telegram_parts(text)):
            if n and guard is not None:
                guard()  # the next part: the lock confirmed afresh
            sent = self.call("sendMessage", address, guard=guard, text=part)
            if first is None and isinstance(sent, dict) and sent.get("message_id") is not None:
                first = str(sent["message_id"])
        return Receipt(message_id=first)

    def typing(self, address: Address, *, session_id: str) -> None:
        # Cosmetic: a 429 is not waited for (the turn's reply matters more than its dots).
        self.call("sendChatAction", address, patient=False, action="typing")

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        return None

    def call(
        self,
        method: str,
        address: Address,
        *,
        patient: bool = True,
        guard: SendGuard | None = None,
        **params: str,
    ) -> object:
        """One Bot API call into the address's chat and topic, or a typed ``DeliveryFailed``."""
        where = {"chat_id": address.chat, "message_thread_id": thread_id(address.thread)}
        try:
            return self.api.call(method, {**where, **params}, patient=patient, guard=guard)
        except Refused as refused:
            raise classify(refused) from None
        except Unreachable as exc:
            raise TransientDelivery(
                f"Telegram did not answer ({exc}); the message may not have been sent.",
                platform=PLATFORM,
                reason="unreachable",
            ) from None


def thread_id(thread: str | None) -> int | None:
    """A forum topic's ``message_thread_id`` as the Bot API wants it (an integer)."""
    digits = thread.lstrip("-") if thread is not None else ""
    return int(digits) if digits.isascii() and digits.isdigit() else None


def telegram_parts(text: str) -> list[str]:
    """``text`` in parts Telegram takes: at most 4,096 UTF-16 code units each."""
    parts: list[str] = []
    for part in split_text(text, SPLIT_AT):
        if utf16_len(part) <= SPLIT_AT:
            parts.append(part)
        else:  # half the limit in characters is within it in UTF-16 units, whatever they are
            parts.extend(split_text(part, SPLIT_AT // 2))
    return parts


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def reason_of(refused: Refused) -> str | None:
    """The reason a refusal is permanent, or None when sending later may work."""
    words = refused.description.lower()
    for status, needle, reason in PERMANENT:
        if refused.status == status and needle in words:
            return reason
    return None


def classify(refused: Refused) -> DeliveryFailed:
    """A Telegram refusal as a permanent or transient failure, with a sentence that says which."""
    reason = reason_of(refused)
    said = refused.description
    if reason == "chat_migrated" and refused.migrate_to is not None:
        said = f"{said}; its new id is {refused.migrate_to}"
    if reason is not None:
        return PermanentDelivery(
            f"Telegram refused the message for good ({said}): add the bot to the chat again, "
            "unblock it, or check its token.",
            platform=PLATFORM,
            reason=reason,
        )
    if refused.status == 429:
        return TransientDelivery(
            "Telegram is rate limiting this bot past the waits a send may take "
            f"({said}); it can be sent later.",
            platform=PLATFORM,
            reason="ratelimited",
        )
    return TransientDelivery(
        f"Telegram did not take the message ({said}); it can be sent later.",
        platform=PLATFORM,
        reason=f"http_{refused.status}",
    )
