"""The channel protocol: how a turn's output reaches a chat platform."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# Called by a channel before every request of one send after its first — a retry, the next
# part of a split reply, a request after a rate-limit wait: it confirms the session's lock
# afresh and raises ``TurnAborted`` when it cannot, so nothing more leaves once the lock may
# have moved on (contract: nothing is sent unless ownership was confirmed just before).
SendGuard = Callable[[], None]


@dataclass(frozen=True)
class Address:
    """Where a message goes: the chat and thread, and the message it answers (if any);
    ``owner``, the session's owner, is whose chat the gateway believes it is (a platform's
    signed inbound names it, ``slack:<team>``): the channels check the outbound allowlists by
    it (``hbgw/gateway/platforms/outbound.py``)."""

    platform: str
    chat: str
    thread: str | None = None
    reply_to: str | None = None
    owner: str | None = None


@dataclass(frozen=True)
class Receipt:
    """What a platform answered to a send: its id for the message (Slack's ``ts``, Telegram's
    ``message_id``), kept on the delivery record; ``duplicate`` when it recognised the delivery
    key and dropped the message as a repeat (the record is then ``suppressed``)."""

    message_id: str | None = None
    duplicate: bool = False


class Channel(Protocol):
    name: str

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
    ) -> Receipt | None:
        """Post a new message; the platform's receipt, or None when it gives none (a failure
        raises: the exception's text is the delivery record's error). ``kind`` is reply,
        heartbeat, notice or failure; ``ref`` names what it answers (the fire id of a heartbeat
        turn), for channels that keep a record.

        ``delivery_key`` is the same for every attempt at one message (``msg:<id>`` for the
        reply to user message ``id``, the fire id for a heartbeat): a platform that
        de-duplicates by key can drop a repeat. The id in it, and ``Address.reply_to``, are
        SQL's: a channel that shows them to another party shows the public id instead
        (``gateway/public_ids.py``; the signed webhook's does). ``possible_repeat``: an older
        turn may already have sent this message (its outcome is unknown); the text then carries
        a visible mark too (``workers/turn_io.py``), for platforms that honour no key.
        ``guard``: see ``SendGuard``; a channel that makes one request per send never calls
        it."""
        ...

    def typing(self, address: Address, *, session_id: str) -> None:
        """Show a typing indicator (never during a heartbeat turn)."""
        ...

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        """Show tool progress or a draft (never during a heartbeat turn)."""
        ...
