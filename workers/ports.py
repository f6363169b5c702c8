"""The channel protocol: how a turn's output reaches a chat platform."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Address:
    """Where a message goes: the chat and thread, and the message it answers (if any)."""

    platform: str
    chat: str
    thread: str | None = None
    reply_to: str | None = None


class Channel(Protocol):
    name: str

    def send(
        self, address: Address, text: str, *, session_id: str, kind: str, ref: str | None = None
    ) -> None:
        """Post a new message. ``kind`` is reply, heartbeat, notice or failure; ``ref`` names
        what it answers (the fire id of a heartbeat turn), for channels that keep a record."""
        ...

    def typing(self, address: Address, *, session_id: str) -> None:
        """Show a typing indicator (never during a heartbeat turn)."""
        ...

    def progress(self, address: Address, text: str, *, session_id: str) -> None:
        """Show tool progress or a draft (never during a heartbeat turn)."""
        ...
