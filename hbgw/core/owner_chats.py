"""HBGW_OWNER_CHATS: the chats an operator has bound to an owner token.

An owner token proves who the caller is, not that the caller is in a Slack channel, a Telegram
group, a Discord channel or a partner's webhook chat. So an owner token makes sessions on those
platforms only for the chats an operator bound to it here; the platform's own signed inbound
(the person proved they are in the chat) and the admin token make the rest.

Format: ``owner=platform:chat,platform:chat;owner2=platform:chat``, e.g.
``alice=slack:C012ABC,telegram:-100123;bob=discord:1234567890``. A chat binds every thread in
it. A malformed entry is a start-up error that names the entry by its position and text, so a
typo never silently leaves an owner without the chat they were given (or with another one).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from hbgw.core.metrics import CHAT_PLATFORMS

SETTING = "HBGW_OWNER_CHATS"
EXAMPLE = "alice=slack:C012ABC,telegram:-100123;bob=discord:1234567890"
_MAX_CHARS = 255  # the owner and chat columns' size (sessions/validation.py)


@dataclass(frozen=True)
class OwnerChats:
    """The bindings, as (owner, platform, chat) triples."""

    bound: frozenset[tuple[str, str, str]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> OwnerChats:
        """The bindings of ``text``; ``ValueError`` with a sentence naming a malformed entry."""
        bound: set[tuple[str, str, str]] = set()
        for position, entry in enumerate((e.strip() for e in text.split(";")), start=1):
            if not entry:
                continue
            bound |= _entry(position, entry)
        return cls(frozenset(bound))

    def binds(self, owner: str | None, platform: str, chat: str) -> bool:
        return owner is not None and (owner, platform, chat) in self.bound


def _entry(position: int, entry: str) -> set[tuple[str, str, str]]:
    def wrong(why: str) -> ValueError:
        return ValueError(f"{SETTING} entry {position} ({entry!r}) {why}; write it like {EXAMPLE}")

    owner, sep, chats = (part.strip() for part in entry.partition("="))
    if not sep or not owner or not chats:
        raise wrong("is not owner=platform:chat")
    if not _plain(owner) or ":" in owner:
        raise wrong(f"has an owner ({owner!r}) that no HBGW_API_TOKENS owner can be")
    found: set[tuple[str, str, str]] = set()
    for item in (c.strip() for c in chats.split(",")):
        platform, colon, chat = (part.strip() for part in item.partition(":"))
        if not colon or not chat:
            raise wrong(f"has {item!r}, which is not platform:chat")
        if platform not in CHAT_PLATFORMS:
            raise wrong(
                f"names the platform {platform!r}; bind chats of {', '.join(CHAT_PLATFORMS)} "
                "(api and cli sessions need no binding)"
            )
        if not _plain(chat):
            raise wrong(f"has the chat {chat!r}, which is not one chat id")
        found.add((owner, platform, chat))
    return found


def _plain(value: str) -> bool:
    """One id: printable, no spaces, within its column."""
    return (
        0 < len(value) <= _MAX_CHARS
        and not any(c.isspace() for c in value)
        and not any(unicodedata.category(c) == "Cc" for c in value)
    )
