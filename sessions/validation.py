"""Input checks for what reaches the SQL truth: sessions' names and users' messages.

Run before any SQL, so a value either backend would reject (lone surrogates from a non-UTF-8
argument, NUL, a value longer than its column — PostgreSQL refuses it, SQLite silently keeps it)
is the same one-sentence ``BadInput`` on both. Pure: no SQLAlchemy, so the CLI and the gateway
edge can call it cheaply; ``sessions/models.py`` takes its column sizes from here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hbgw.core.errors import BadInput

if TYPE_CHECKING:
    from hbgw.core.settings import Settings

PLATFORM_CHARS = 64
CHAT_CHARS = 255
THREAD_CHARS = 255
OWNER_CHARS = 255
IDEMPOTENCY_KEY_CHARS = 255
SCHEDULE_CHARS = 255
TIMEZONE_CHARS = 64
# "HH:MM-HH:MM <zone> weekdays" (the zone at most TIMEZONE_CHARS).
ACTIVE_HOURS_CHARS = 96
DEFAULT_MAX_MESSAGE_CHARS = 16_000


@dataclass(frozen=True)
class MessageLimits:
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    """Longest user message accepted (HBGW_MAX_MESSAGE_CHARS)."""


def message_limits_from_settings(settings: Settings) -> MessageLimits:
    return MessageLimits(max_message_chars=settings.max_message_chars)


def check_storable(value: str, what: str) -> None:
    """Text SQL can hold the same way on every backend: UTF-8 encodable, no NUL."""
    for position, char in enumerate(value, start=1):
        if "\ud800" <= char <= "\udfff":
            raise BadInput(
                f"The {what} is not valid UTF-8 (at character {position}); send it as UTF-8 text."
            )
        if char == "\x00":
            raise BadInput(f"The {what} contains a NUL character at {position}; remove it.")


def check_name(value: str, what: str, max_chars: int) -> None:
    """A platform, chat, thread or owner id: one printable line of at most ``max_chars``."""
    check_storable(value, what)
    if not value.strip():
        raise BadInput(f"The {what} is empty; give the {what} id as the platform names it.")
    for position, char in enumerate(value, start=1):
        if unicodedata.category(char) == "Cc":
            raise BadInput(f"The {what} contains a control character at {position}; remove it.")
    if len(value) > max_chars:
        raise BadInput(
            f"The {what} is {len(value)} characters long; at most {max_chars} are accepted."
        )


@dataclass(frozen=True)
class IdFormat:
    """What one platform's chat or thread ids look like, in a pattern and in words."""

    pattern: re.Pattern[str]
    words: str


_SNOWFLAKE = IdFormat(
    re.compile(r"[0-9]{1,20}"), "a Discord snowflake: up to 20 digits, like 1234567890123456789"
)
# The ids a channel sends to: a Discord id is a URL path segment, a Telegram or Slack id a
# field of the request, so anything but the platform's own shape is refused before it is
# stored (a chat like "1/../../guilds/777/prune" would otherwise steer the bot's token).
# Slack's conversation ids are C…, G… or D… (users' U… for a direct message), 9 to 11
# uppercase letters and digits today, and a thread is its first message's ts (1700000000.000100);
# both are held to their character sets, not to exact shapes: Slack has lengthened its ids
# before, and sessions made before this check name threads with letters too (T1).
PLATFORM_IDS: dict[str, tuple[IdFormat, IdFormat]] = {
    "discord": (_SNOWFLAKE, _SNOWFLAKE),
    "telegram": (
        IdFormat(
            re.compile(r"-?[0-9]{1,20}"),
            "a Telegram chat id: digits, a minus in front for a group, like -1001234567890",
        ),
        IdFormat(re.compile(r"[0-9]{1,20}"), "a Telegram topic id: up to 20 digits, like 42"),
    ),
    "slack": (
        IdFormat(
            re.compile(r"[A-Z][A-Z0-9]{0,31}"),
            "a Slack conversation id: uppercase letters and digits, like C0123ABCDEF",
        ),
        IdFormat(
            re.compile(r"[A-Za-z0-9][A-Za-z0-9.]{0,31}"),
            "a Slack thread ts: letters, digits and dots, like 1700000000.000100",
        ),
    ),
}


def check_platform_ids(platform: str, chat: str, thread: str | None) -> None:
    """A Discord, Telegram or Slack chat (and thread) id in that platform's own format; the
    other platforms' chats (webhook, api, cli) are names their owners choose."""
    formats = PLATFORM_IDS.get(platform)
    if formats is None:
        return
    for what, value, form in (("chat", chat, formats[0]), ("thread", thread, formats[1])):
        if value is not None and form.pattern.fullmatch(value) is None:
            raise BadInput(
                f"The {what} {_shown(value)} is not a {platform} {what} id — give {form.words}."
            )


def _shown(value: str, limit: int = 40) -> str:
    return repr(value) if len(value) <= limit else repr(value[: limit - 1] + "…")


def check_session_names(*, platform: str, chat: str, thread: str | None, owner: str | None) -> None:
    check_name(platform, "platform", PLATFORM_CHARS)
    check_name(chat, "chat", CHAT_CHARS)
    if thread is not None:
        check_name(thread, "thread", THREAD_CHARS)
    if owner is not None:
        check_name(owner, "owner", OWNER_CHARS)
    check_platform_ids(platform, chat, thread)


def check_user_text(text: str) -> None:
    """What the store itself requires of a user message: storable and not blank."""
    check_storable(text, "message")
    if not text.strip():
        raise BadInput("The message is empty; write some text to send.")


def check_message(text: str, limits: MessageLimits) -> None:
    """A user message at the edge: storable, not blank, within HBGW_MAX_MESSAGE_CHARS."""
    check_user_text(text)
    if len(text) > limits.max_message_chars:
        raise BadInput(
            f"The message is {len(text)} characters long; at most {limits.max_message_chars} "
            "are accepted (HBGW_MAX_MESSAGE_CHARS) — shorten it or split it."
        )


def check_idempotency_key(key: str) -> None:
    check_name(key, "idempotency key", IDEMPOTENCY_KEY_CHARS)


def check_schedule_text(schedule_text: str, cron_expr: str | None) -> None:
    """A heartbeat's schedule as written (and its cron expression) fits its column: a long
    cron field list parses fine, but PostgreSQL refuses it and SQLite silently keeps it."""
    check_storable(schedule_text, "schedule")
    for text in (schedule_text, cron_expr or ""):
        if len(text) > SCHEDULE_CHARS:
            raise BadInput(
                f"The schedule is {len(text)} characters long; at most {SCHEDULE_CHARS} are "
                "accepted — use a shorter cron expression (ranges like 1-5, steps like */5)."
            )
