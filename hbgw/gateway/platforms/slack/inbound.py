"""What a verified Slack request does: an event's message reaches its session (a turn, or a
/heartbeat command answered in the thread), a slash command is answered in its response.

Everything here runs after the signature, the replay window and the workspace allowlist have
passed (``routes.py``), on the API's own store, Runtime and clock — the same path as
``POST /v1/sessions/{id}/messages`` (``gateway.inbound.receive``).
"""

from __future__ import annotations

import logging
from typing import Any

from hbgw.core.errors import BadInput, QuotaExceeded
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.quotas import check_message_rate
from hbgw.gateway.inbound import Answered
from hbgw.gateway.platforms import guard
from hbgw.gateway.platforms.guard import NO_SESSION, Answer
from hbgw.gateway.platforms.slack.channel import SlackChannel
from hbgw.gateway.platforms.slack.events import (
    PLATFORM,
    SlashCommand,
    as_command,
    command_usage,
    read_message,
    session_thread,
)
from hbgw.workers.ports import Address

log = logging.getLogger("hbgw.slack")


def take_event(ctx: ApiContext, payload: dict[str, Any]) -> Answer | None:
    """Store the event's user message, or apply its /heartbeat command; the sentence to post
    back for a command (or a refused message), None when there is nothing to say."""
    message = read_message(payload)
    if message is None:
        return None
    thread, may_start = session_thread(message)
    key = message.idempotency_key
    try:
        session = ctx.store.sessions.session_at(
            platform=PLATFORM,
            chat=message.channel,
            thread=thread,
            now=ctx.clock(),
            owner=message.owner,
            create=may_start,
        )
    except QuotaExceeded as exc:  # a new conversation beyond the workspace's sessions
        address = Address(PLATFORM, message.channel, thread)
        return Answer(NO_SESSION, address, str(exc), f"{key}:answer")
    if session is None:
        return None  # a thread the app was never asked into
    text = as_command(message.text, addressed=message.direct or message.mentions_app)
    address = Address(PLATFORM, session.chat, session.thread)
    refused = over_limits(ctx, session.id)
    if refused is not None:  # told in its thread, like the API's 429: nothing is stored
        return Answer(session.id, address, refused, f"{key}:answer")
    try:
        result = ctx.receive(session.id, text, idempotency_key=key)
    except BadInput as exc:
        # A command's error is its answer; a refused message is told why, in its thread.
        return Answer(session.id, address, str(exc), f"{key}:answer")
    if isinstance(result, Answered):
        ctx.metrics.commands.labels("true").inc()
        return Answer(result.session_id, address, result.text, f"{key}:answer")
    if not result.duplicate:
        ctx.metrics.messages.inc()
    return None


def take_command(ctx: ApiContext, command: SlashCommand, name: str) -> str:
    """The reply sentence of ``/hbgw heartbeat …`` (or ``hb``), for the channel's session."""
    text = as_command(command.text, addressed=True)
    if not text.startswith(("/heartbeat", "/hb", "/cron")):
        return command_usage(name)
    try:
        session = ctx.store.sessions.session_at(
            platform=PLATFORM,
            chat=command.channel,
            thread=None,
            now=ctx.clock(),
            owner=command.owner,
        )
        assert session is not None  # create=True
        refused = over_limits(ctx, session.id)
        if refused is not None:
            ctx.metrics.commands.labels("false").inc()
            return refused
        result = ctx.receive(session.id, text)
    except BadInput as exc:  # the command's, or the owner's quota of sessions
        ctx.metrics.commands.labels("false").inc()
        return str(exc)
    assert isinstance(result, Answered)  # the text is a /heartbeat or /cron command
    ctx.metrics.commands.labels("true").inc()
    return result.text


def over_limits(ctx: ApiContext, session_id: str) -> str | None:
    """The HTTP API's message rate, for Slack's messages too (HBGW_API_MESSAGES_PER_MINUTE):
    its sentence when exceeded, or None. The quotas are the store's: ``receive`` answers them
    (a workspace is one owner)."""
    try:
        check_message_rate(ctx.redis, session_id, ctx.settings.api_messages_per_minute)
    except ApiError as exc:
        return exc.message
    return None


def post_answer(channel: SlackChannel, answer: Answer) -> None:
    """Post a command's answer into its conversation (``guard.post_answer``)."""
    guard.post_answer(channel, answer, PLATFORM)
