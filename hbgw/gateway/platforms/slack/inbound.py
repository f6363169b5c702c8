"""What a verified Slack request does: an event's message reaches its session (a turn, or a
/heartbeat command answered in the thread), a slash command is answered in its response.

Everything here runs after the signature, the replay window and the workspace allowlist have
passed (``routes.py``), on the API's own store, Runtime and clock — the same path as
``POST /v1/sessions/{id}/messages`` (``gateway.inbound.receive``).
"""

from __future__ import annotations

import logging
from typing import Any

from hbgw.core.errors import BadInput, GrammarError
from hbgw.gateway.api.auth import Principal
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.api.quotas import check_heartbeats, check_message_rate
from hbgw.gateway.inbound import Answered
from hbgw.gateway.platforms import guard
from hbgw.gateway.platforms.guard import Answer
from hbgw.gateway.platforms.slack.channel import SlackChannel
from hbgw.gateway.platforms.slack.events import (
    PLATFORM,
    SlashCommand,
    as_command,
    command_usage,
    read_message,
    session_thread,
)
from hbgw.sessions.grammar import SetHeartbeat, parse_command
from hbgw.workers.ports import Address

log = logging.getLogger("hbgw.slack")


def take_event(ctx: ApiContext, payload: dict[str, Any]) -> Answer | None:
    """Store the event's user message, or apply its /heartbeat command; the sentence to post
    back for a command (or a refused message), None when there is nothing to say."""
    message = read_message(payload)
    if message is None:
        return None
    thread, may_start = session_thread(message)
    session = ctx.store.sessions.session_at(
        platform=PLATFORM,
        chat=message.channel,
        thread=thread,
        now=ctx.clock(),
        owner=message.owner,
        create=may_start,
    )
    if session is None:
        return None  # a thread the app was never asked into
    text = as_command(message.text, addressed=message.direct or message.mentions_app)
    address = Address(PLATFORM, session.chat, session.thread)
    key = message.idempotency_key
    refused = over_limits(ctx, session.id, message.owner, text)
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
    session = ctx.store.sessions.session_at(
        platform=PLATFORM, chat=command.channel, thread=None, now=ctx.clock(), owner=command.owner
    )
    assert session is not None  # create=True
    refused = over_limits(ctx, session.id, command.owner, text)
    if refused is not None:
        ctx.metrics.commands.labels("false").inc()
        return refused
    try:
        result = ctx.receive(session.id, text)
    except BadInput as exc:
        ctx.metrics.commands.labels("false").inc()
        return str(exc)
    assert isinstance(result, Answered)  # the text is a /heartbeat or /cron command
    ctx.metrics.commands.labels("true").inc()
    return result.text


def over_limits(ctx: ApiContext, session_id: str, owner: str | None, text: str) -> str | None:
    """The HTTP API's limits, for Slack's messages too: the session's message rate
    (HBGW_API_MESSAGES_PER_MINUTE) and, for a /heartbeat that sets one, the workspace's
    heartbeat quota (HBGW_API_MAX_HEARTBEATS_PER_OWNER; a workspace is one owner). The
    sentence of the first one exceeded, or None."""
    settings = ctx.settings
    try:
        check_message_rate(ctx.redis, session_id, settings.api_messages_per_minute)
        limit = settings.api_max_heartbeats_per_owner
        if limit and owner is not None and sets_heartbeat(text, ctx):
            count = ctx.store.heartbeats.count_live_heartbeats(owner, besides=session_id)
            check_heartbeats(count, limit, Principal(owner))
    except ApiError as exc:
        return exc.message
    return None


def sets_heartbeat(text: str, ctx: ApiContext) -> bool:
    try:
        return isinstance(parse_command(text, ctx.limits), SetHeartbeat)
    except GrammarError:
        return False  # not a command, or a malformed one (its own answer says what is wrong)


def post_answer(channel: SlackChannel, answer: Answer) -> None:
    """Post a command's answer into its conversation (``guard.post_answer``)."""
    guard.post_answer(channel, answer, PLATFORM)
