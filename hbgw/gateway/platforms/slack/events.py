"""What a Slack Events API payload or slash command means for the gateway: pure functions,
no I/O, so every mapping rule is tested on its own.

Sessions (``platform="slack"``, ``owner="slack:<team id>"``):

* a **thread** is a session: ``chat`` = channel id, ``thread`` = the thread's ``thread_ts``;
* in a channel (public, private, group DM) a top-level message is taken only when it mentions
  the app (``<@bot>``); it starts a thread session rooted at it (``thread`` = its ``ts``), so the
  answer goes into a thread under it. A reply in a thread is taken when that thread is already
  a session, or when it mentions the app;
* a **DM** with the app is one conversation (``thread`` None) for its top-level messages; a
  thread inside the DM is a session of its own;
* the ``/hbgw`` slash command speaks for the channel it is typed in (Slack runs no slash
  command inside a thread): its session is ``thread`` None, so its heartbeat posts top-level
  messages in the channel. To set one inside a thread, write ``/heartbeat …`` (Slack offers to
  send it as a message) or ``@app heartbeat …`` in the thread.

Ignored: messages of bots (ours included: Slack sends our own posts back), message subtypes
(edits, deletions, joins, …; only a plain message and a thread reply also sent to the channel
count), events of other types, and messages without a user or text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PLATFORM = "slack"
TAKEN_SUBTYPES = frozenset({"", "thread_broadcast"})
CHANNEL_TYPES = frozenset({"channel", "group", "mpim", "im"})
COMMAND_WORDS = frozenset({"heartbeat", "hb", "cron"})
_MENTION = re.compile(r"^\s*<@([A-Z0-9]+)(?:\|[^>]*)?>[\s:,]*")


@dataclass(frozen=True)
class SlackMessage:
    """One user message, as the gateway takes it."""

    team: str
    channel: str
    ts: str
    thread_ts: str | None
    text: str  # unescaped; with a leading mention of the app removed
    direct: bool  # in a DM with the app
    mentions_app: bool

    @property
    def owner(self) -> str:
        return owner_of(self.team)

    @property
    def idempotency_key(self) -> str:
        """Slack's message id: ``ts`` is unique within a channel, and a session is in one."""
        return f"slack:{self.ts}"


def owner_of(team: str) -> str:
    """The owner of a workspace's sessions: an API token of this owner sees them."""
    return f"slack:{team}"


def app_user(payload: dict[str, Any]) -> str | None:
    """The app's own user id in this workspace, from the event's ``authorizations``."""
    for auth in payload.get("authorizations") or ():
        if isinstance(auth, dict) and auth.get("is_bot") and isinstance(auth.get("user_id"), str):
            return str(auth["user_id"])
    return None


def read_message(payload: dict[str, Any]) -> SlackMessage | None:
    """The user message an ``event_callback`` carries, or None when it is not one to take."""
    event = payload.get("event")
    if not isinstance(event, dict) or event.get("type") != "message":
        return None
    if event.get("bot_id") or event.get("subtype", "") not in TAKEN_SUBTYPES:
        return None
    user, text, channel, ts = (event.get(k) for k in ("user", "text", "channel", "ts"))
    if not all(isinstance(v, str) and v for v in (user, text, channel, ts)):
        return None
    assert isinstance(text, str) and isinstance(channel, str) and isinstance(ts, str)
    me = app_user(payload)
    if me is not None and user == me:
        return None
    channel_type = event.get("channel_type", "")
    if channel_type not in CHANNEL_TYPES:
        return None
    thread_ts = event.get("thread_ts")
    team = payload.get("team_id") or event.get("team") or ""
    # The mention is read from the raw text: an escaped "&lt;@U…&gt;" a user typed is no mention.
    body, mentioned = strip_mention(text, me)
    return SlackMessage(
        team=str(team),
        channel=channel,
        ts=ts,
        thread_ts=thread_ts if isinstance(thread_ts, str) and thread_ts else None,
        text=unescape(body),
        direct=channel_type == "im",
        mentions_app=mentioned,
    )


def session_thread(message: SlackMessage) -> tuple[str | None, bool]:
    """The session's thread for this message, and whether a new session may start for it."""
    if message.thread_ts is not None:
        return message.thread_ts, message.direct or message.mentions_app
    if message.direct:
        return None, True
    return message.ts, message.mentions_app


def strip_mention(text: str, me: str | None) -> tuple[str, bool]:
    """``text`` without a leading mention of the app; whether the app was mentioned at all."""
    if me is None:
        return text, False
    match = _MENTION.match(text)
    if match and match.group(1) == me:
        return text[match.end() :], True
    return text, f"<@{me}>" in text


def as_command(text: str, *, addressed: bool) -> str:
    """``/heartbeat …``, ``/hb …`` and ``/cron …`` stay commands; ``heartbeat …`` (``cron …``)
    said to the app (after a
    mention, in a DM, or as the slash command's text) becomes one too."""
    stripped = text.strip()
    if stripped.startswith("/"):
        return stripped
    word, _, rest = stripped.partition(" ")
    if addressed and word.lower() in COMMAND_WORDS:
        return f"/{word.lower()} {rest}".rstrip()
    return text


def unescape(text: str) -> str:
    """Slack escapes these three in message and command text; the agent reads plain text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


@dataclass(frozen=True)
class SlashCommand:
    team: str
    channel: str
    text: str  # what follows /hbgw

    @property
    def owner(self) -> str:
        return owner_of(self.team)


def read_command(form: dict[str, list[str]]) -> SlashCommand | None:
    """A slash command's form fields; None when a required one is missing."""

    def one(name: str) -> str:
        values = form.get(name) or [""]
        return values[0]

    team, channel = one("team_id"), one("channel_id")
    if not team or not channel or not one("command"):
        return None
    return SlashCommand(team=team, channel=channel, text=unescape(one("text")))


def command_usage(name: str) -> str:
    return (
        f"Use {name} heartbeat (or {name} hb) with a /heartbeat command: "
        f"{name} heartbeat every 15m <prompt>, {name} hb status, {name} hb pause, "
        f"{name} hb resume, {name} hb clear; {name} cron add in 10m -- <prompt>, "
        f"{name} cron list for scheduled prompts."
    )
