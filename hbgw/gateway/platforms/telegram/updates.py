"""What a Telegram update means for the gateway: pure functions, no I/O, so every mapping rule is
tested on its own.

Sessions (``platform="telegram"``, ``owner="telegram:<bot id>"``):

* a **chat** is a session: ``chat`` = the chat's id (a private chat, a group, a supergroup),
  ``thread`` None;
* a **forum topic** is a session of its own: ``thread`` = its ``message_thread_id``, taken only
  when Telegram marks the message ``is_topic_message``. Reply threads in a group that is not a
  forum carry a ``message_thread_id`` too; they belong to the chat's session (a reply there is
  a message of the chat, and answers go to the chat). The forum's *General* topic has no id: it
  is the chat's session.

Every text message Telegram hands the bot is taken: in groups, the bot's privacy mode (on by
default, BotFather ``/setprivacy``) decides which messages it gets — commands, replies to the
bot, mentions — so the gateway does not filter again. Ignored: messages of bots, messages
without text (photos, stickers, service messages; a caption is not taken), edited messages and
channel posts (``allowed_updates`` asks for ``message`` only), and commands addressed to
another bot (``/heartbeat@otherbot``).

``/heartbeat …`` and ``/hb …`` are commands, with or without the ``@botname`` that Telegram's
command menu adds in groups; ``/start`` and ``/help`` answer the usage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PLATFORM = "telegram"
CHAT_TYPES = frozenset({"private", "group", "supergroup"})
USAGE_COMMANDS = frozenset({"start", "help"})
_COMMAND = re.compile(r"^\s*/([A-Za-z0-9_]+)(?:@([A-Za-z0-9_]+))?(?=\s|$)")


@dataclass(frozen=True)
class TelegramMessage:
    """One user message, as the gateway takes it."""

    update_id: int
    chat: str
    thread: str | None  # the forum topic's message_thread_id; None for the chat itself
    message_id: int
    text: str

    @property
    def idempotency_key(self) -> str:
        """Telegram's message id: unique within a chat, and a session is in one chat."""
        return f"telegram:{self.message_id}"


@dataclass(frozen=True)
class Command:
    """A leading ``/name`` or ``/name@bot`` of a message's text."""

    name: str  # lower case
    bot: str | None  # the @suffix, if any
    rest: str  # what follows


def owner_of(bot_id: str) -> str:
    """The owner of the bot's sessions: an API token of this owner sees them."""
    return f"telegram:{bot_id}"


def update_id(payload: Any) -> int | None:
    value = payload.get("update_id") if isinstance(payload, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_update(payload: dict[str, Any]) -> TelegramMessage | None:
    """The user message an update carries; None for anything the gateway does not take."""
    uid = update_id(payload)
    message = payload.get("message")
    if uid is None or not isinstance(message, dict):
        return None
    chat = message.get("chat")
    sender = message.get("from")
    text = message.get("text")
    mid = message.get("message_id")
    if not isinstance(chat, dict) or chat.get("type") not in CHAT_TYPES:
        return None
    if not isinstance(chat.get("id"), int) or not isinstance(mid, int):
        return None
    if not isinstance(sender, dict) or sender.get("is_bot") is not False:
        return None  # bots (ours included) and anonymous senders without a user
    if not isinstance(text, str) or not text.strip():
        return None
    return TelegramMessage(uid, str(chat["id"]), topic_of(message), mid, text)


def topic_of(message: dict[str, Any]) -> str | None:
    """The forum topic a message is in; None outside forums (and in the General topic)."""
    thread = message.get("message_thread_id")
    if message.get("is_topic_message") is True and isinstance(thread, int):
        return str(thread)
    return None


def read_command(text: str) -> Command | None:
    match = _COMMAND.match(text)
    if match is None:
        return None
    return Command(match.group(1).lower(), match.group(2), text[match.end() :].strip())


def as_text(command: Command | None, text: str) -> str:
    """The text the gateway hands on: ``/heartbeat@bot every 15m …`` as ``/heartbeat every
    15m …`` (the suffix only says which bot the command is for); anything else unchanged."""
    if command is None or command.name not in ("heartbeat", "hb", "cron"):
        return text
    return f"/{command.name} {command.rest}".rstrip()


def usage() -> str:
    return (
        "Send /heartbeat (or /hb) with a command: /heartbeat every 15m <prompt>, /hb status, "
        "/hb pause, /hb resume, /hb clear; /cron add in 10m -- <prompt>, /cron list for "
        "scheduled prompts. Any other message is for the agent."
    )
