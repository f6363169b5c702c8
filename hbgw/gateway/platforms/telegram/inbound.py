"""What a verified Telegram update does, whichever way it came (the webhook, ``routes.py``, or
long polling, ``polling.py``): dropped when its chat is not allowed or it was seen before;
otherwise its message reaches its session — a turn, or a /heartbeat command whose answer is
posted back into the chat and topic.

Everything here runs after the secret token has passed (or, polling, on what the Bot API itself
answered), on an ``ApiContext``'s store, Runtime and clock, through ``ApiContext.receive`` —
the same path as ``POST /v1/sessions/{id}/messages``.
"""

from __future__ import annotations

import logging
from typing import Any

from hbgw.core.errors import BadInput, QuotaExceeded
from hbgw.core.settings import Settings
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.inbound import Answered
from hbgw.gateway.platforms.guard import (
    NO_SESSION,
    Answer,
    InboundRejects,
    Reject,
    SeenEvents,
    post_answer,
)
from hbgw.gateway.platforms.telegram.api import Refused, Unreachable
from hbgw.gateway.platforms.telegram.channel import TelegramChannel
from hbgw.gateway.platforms.telegram.updates import (
    PLATFORM,
    USAGE_COMMANDS,
    TelegramMessage,
    as_text,
    owner_of,
    read_command,
    read_update,
    update_id,
    usage,
)
from hbgw.workers.ports import Address

log = logging.getLogger("hbgw.telegram")


class TelegramBot:
    """What both inbound paths share: the chat allowlist, the ``update_id`` de-duplication,
    the bot's own user name (for ``/cmd@name``), and the channel answers go out through."""

    def __init__(
        self,
        settings: Settings,
        channel: TelegramChannel,
        seen: SeenEvents,
        rejects: InboundRejects | None = None,
    ) -> None:
        self.channel = channel
        self.seen = seen
        self.rejects = rejects
        self.chats = settings.telegram_chat_ids
        self.owner = owner_of(channel.api.bot_id)
        self._me: str | None = None

    def username(self) -> str | None:
        """The bot's @name, asked of Telegram (getMe) the first time a command names a bot."""
        if self._me is None:
            try:
                me = self.channel.api.call("getMe", {}, patient=False)
            except (Refused, Unreachable) as exc:
                log.warning(
                    "getMe failed, so /cmd@name is taken as ours: %s",
                    exc,
                    extra={"action": "telegram.getme_failed"},
                )
                return None
            if isinstance(me, dict) and isinstance(me.get("username"), str):
                self._me = str(me["username"])
        return self._me

    def for_other(self, bot: str) -> bool:
        """``/cmd@bot`` names another bot of the group (unknown ``me``: taken as ours)."""
        me = self.username()
        return me is not None and bot.lower() != me.lower()

    def take(self, ctx: ApiContext, payload: dict[str, Any]) -> Answer | None:
        """A verified update: its message stored or its command applied (the sentence to post
        back, if any); None when there is nothing to take or say."""
        message = read_update(payload)
        if message is None:
            return None
        if self.chats and message.chat not in self.chats:
            if self.rejects is not None:
                self.rejects.count(PLATFORM, Reject.CHAT)
            return None
        uid = str(update_id(payload))
        if not self.seen.first(uid):
            log.info("Telegram update %s seen before", uid, extra={"action": "telegram.repeat"})
            return None
        try:
            return self.take_message(ctx, message)
        except BaseException:
            self.seen.forget(uid)  # not taken: Telegram's retry (or the next poll) must be
            raise

    def take_message(self, ctx: ApiContext, message: TelegramMessage) -> Answer | None:
        command = read_command(message.text)
        if command is not None and command.bot is not None and self.for_other(command.bot):
            return None
        key = message.idempotency_key
        try:
            session = ctx.store.sessions.session_at(
                platform=PLATFORM,
                chat=message.chat,
                thread=message.thread,
                now=ctx.clock(),
                owner=self.owner,
            )
        except QuotaExceeded as exc:  # a new topic beyond the owner's sessions: told in it
            address = Address(PLATFORM, message.chat, message.thread)
            return Answer(NO_SESSION, address, str(exc), f"{key}:answer")
        assert session is not None  # create=True
        address = Address(PLATFORM, session.chat, session.thread)
        if command is not None and command.name in USAGE_COMMANDS:
            return Answer(session.id, address, usage(), f"{key}:answer")
        try:
            result = ctx.receive(session.id, as_text(command, message.text), idempotency_key=key)
        except BadInput as exc:
            # A command's error is its answer; a refused message is told why, in its chat.
            return Answer(session.id, address, str(exc), f"{key}:answer")
        if isinstance(result, Answered):
            ctx.metrics.commands.labels("true").inc()
            return Answer(result.session_id, address, result.text, f"{key}:answer")
        if not result.duplicate:
            ctx.metrics.messages.inc()
        return None

    def post(self, answer: Answer) -> None:
        """Post a command's answer into its chat and topic (``guard.post_answer``)."""
        post_answer(self.channel, answer, PLATFORM)
