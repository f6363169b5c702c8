"""What a Discord interaction means for the gateway: pure functions, no I/O, so every mapping
rule is tested on its own.

Sessions (``platform="discord"``, ``owner="discord:<guild id>"``, ``discord:dm`` in a DM with the
bot):

* a **channel** is a session: ``chat`` = its id, ``thread`` none;
* a **thread** (Discord gives it a channel id of its own; forum posts are threads too) is a
  session of its own: ``chat`` = its parent channel's id, ``thread`` = the thread's id. Delivery
  goes to the thread's id, so its heartbeat posts in the thread;
* the guild is the session's owner, so an API token of ``discord:<guild id>`` sees its sessions.

What reaches a session — an HTTP interactions endpoint receives interactions only, never
ordinary channel messages (those need the Gateway websocket, out of scope):

* ``/heartbeat text:…`` (or ``/hb``) — the /heartbeat command line, parsed by the one grammar
  every platform uses (``sessions.grammar``);
* ``/cron text:…`` — the /cron command line: this channel's (or thread's) cron jobs;
* ``/ask text:…`` — a user message: a turn whose reply is posted in the channel or thread;
* the message command *Ask the agent* (a message's ⋯ → Apps) — that message's text, as a user
  message of the session of the channel it is in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

PLATFORM = "discord"
THREAD_TYPES = frozenset({10, 11, 12})  # announcement, public and private threads
EPHEMERAL = 1 << 6  # message flag: only the invoking user sees it
NO_PINGS: dict[str, Any] = {"parse": []}
CONTENT_LIMIT = 2000


class Kind(IntEnum):
    PING = 1
    APPLICATION_COMMAND = 2


class Answer(IntEnum):
    PONG = 1
    CHANNEL_MESSAGE = 4
    DEFERRED_CHANNEL_MESSAGE = 5


HEARTBEAT_NAMES = frozenset({"heartbeat", "hb"})
CRON_NAME = "cron"
ASK_NAME = "ask"
ASK_MESSAGE_NAME = "Ask the agent"
TEXT_OPTION = "text"


@dataclass(frozen=True)
class Interaction:
    """One application command, as the gateway takes it."""

    id: str
    token: str
    application_id: str
    guild: str | None
    channel: str  # where it was used: a thread's own id inside a thread
    parent: str | None  # the thread's channel, when it was used in a thread
    name: str
    text: str  # the ``text`` option, or the target message's content
    target: str | None = None  # the message a message command was used on

    @property
    def owner(self) -> str:
        return owner_of(self.guild)

    @property
    def chat(self) -> str:
        return self.parent or self.channel

    @property
    def thread(self) -> str | None:
        return self.channel if self.parent else None

    @property
    def is_command(self) -> bool:
        """/heartbeat, /hb or /cron: a command line answered at once (deferred)."""
        return self.name in HEARTBEAT_NAMES or self.name == CRON_NAME

    @property
    def idempotency_key(self) -> str:
        """A message command's target message is asked about once; an /ask is its interaction."""
        return f"discord:{self.target or self.id}"

    def command_line(self) -> str:
        """``/heartbeat <text>`` (``/cron <text>``) for the grammar; an /ask's text as written."""
        if self.is_command:
            name = CRON_NAME if self.name == CRON_NAME else "heartbeat"
            return f"/{name} {self.text}".rstrip()
        return self.text


def owner_of(guild: str | None) -> str:
    return f"discord:{guild}" if guild else "discord:dm"


def read_interaction(payload: dict[str, Any]) -> Interaction | None:
    """The application command a payload carries; None when it is not the shape Discord sends."""
    data, channel = payload.get("data"), payload.get("channel")
    ids = [payload.get(k) for k in ("id", "token", "application_id", "channel_id")]
    if not isinstance(data, dict) or not all(_text(v) for v in ids):
        return None
    name = data.get("name")
    if not _text(name):
        return None
    guild = payload.get("guild_id")
    parent = None
    if isinstance(channel, dict) and channel.get("type") in THREAD_TYPES:
        parent = channel.get("parent_id") if _text(channel.get("parent_id")) else None
    target = data.get("target_id") if data.get("type") == 3 else None
    text = _target_text(data, target) if _text(target) else _option_text(data)
    return Interaction(
        id=str(ids[0]),
        token=str(ids[1]),
        application_id=str(ids[2]),
        guild=str(guild) if _text(guild) else None,
        channel=str(ids[3]),
        parent=str(parent) if parent else None,
        name=str(name),
        text=text,
        target=str(target) if _text(target) else None,
    )


def _option_text(data: dict[str, Any]) -> str:
    for option in data.get("options") or ():
        if isinstance(option, dict) and option.get("name") == TEXT_OPTION:
            value = option.get("value")
            return value.strip() if isinstance(value, str) else ""
    return ""


def _target_text(data: dict[str, Any], target: Any) -> str:
    resolved = data.get("resolved")
    messages = resolved.get("messages") if isinstance(resolved, dict) else None
    message = messages.get(target) if isinstance(messages, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content.strip() if isinstance(content, str) else ""


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and len(value) <= 200


def pong() -> dict[str, Any]:
    return {"type": Answer.PONG}


def deferred(*, ephemeral: bool) -> dict[str, Any]:
    """The app is thinking: the answer follows by editing the original response."""
    return {
        "type": Answer.DEFERRED_CHANNEL_MESSAGE,
        "data": {"flags": EPHEMERAL if ephemeral else 0},
    }


def said(content: str, *, ephemeral: bool) -> dict[str, Any]:
    return {
        "type": Answer.CHANNEL_MESSAGE,
        "data": {
            "content": clip(content),
            "allowed_mentions": NO_PINGS,
            "flags": EPHEMERAL if ephemeral else 0,
        },
    }


def quoted(text: str) -> str:
    """An /ask's text as the channel sees it above the reply (Discord shows who asked)."""
    return clip(f">>> {text}")


def clip(content: str) -> str:
    return content if len(content) <= CONTENT_LIMIT else content[: CONTENT_LIMIT - 1] + "…"


def usage() -> str:
    return (
        "Use /heartbeat (or /hb) with text: every 15m <prompt>, status, pause, resume or "
        "clear; /ask text: <message> to talk to the agent here."
    )
