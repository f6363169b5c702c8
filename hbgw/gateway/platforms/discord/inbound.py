"""What a verified Discord interaction does: ``/heartbeat`` is applied to its channel's or
thread's session and answered by editing the deferred response; ``/ask`` (and *Ask the agent*)
store a user message, whose turn a worker answers in the channel or thread.

Everything here runs after the signature, the replay window and the guild allowlist have
passed (``routes.py``), on the API's own store, Runtime and clock — the same path as
``POST /v1/sessions/{id}/messages`` (``gateway.inbound.receive``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hbgw.core.clock import pause
from hbgw.core.errors import BadInput, DeliveryFailed
from hbgw.gateway.api.context import ApiContext
from hbgw.gateway.inbound import Answered
from hbgw.gateway.platforms.discord.interactions import EPHEMERAL, NO_PINGS, PLATFORM, Interaction
from hbgw.gateway.platforms.discord.rest import DiscordRest, Route, segment
from hbgw.gateway.platforms.split import split_text
from hbgw.sessions.views import SessionView

log = logging.getLogger("hbgw.discord")

FOLLOW_UP_ATTEMPTS = 3  # the edit may reach Discord before it has taken the deferral
FOLLOW_UP_PAUSE = 0.5


def session_of(ctx: ApiContext, interaction: Interaction) -> SessionView:
    session = ctx.store.sessions.session_at(
        platform=PLATFORM,
        chat=interaction.chat,
        thread=interaction.thread,
        now=ctx.clock(),
        owner=interaction.owner,
    )
    assert session is not None  # create=True
    return session


def take_heartbeat(ctx: ApiContext, interaction: Interaction) -> str:
    """The answer to ``/heartbeat …`` (or ``/hb``): the command applied, or why it was not."""
    try:
        session = session_of(ctx, interaction)
        result = ctx.receive(session.id, interaction.command_line())
    except BadInput as exc:  # the command's, or the owner's quota of sessions
        ctx.metrics.commands.labels("false").inc()
        return str(exc)
    assert isinstance(result, Answered)  # the text is a /heartbeat or /cron command
    ctx.metrics.commands.labels("true").inc()
    return result.text


def take_message(ctx: ApiContext, interaction: Interaction) -> str | None:
    """Store an /ask's text as a user message; None once it is queued, else the sentence that
    answers it (a refusal, or a /heartbeat written as the message)."""
    if not interaction.text:
        return "That message has no text to ask about."
    key = interaction.idempotency_key
    try:
        session = session_of(ctx, interaction)
        result = ctx.receive(session.id, interaction.text, idempotency_key=key)
    except BadInput as exc:  # a refusal, the owner's quota of sessions included
        return str(exc)
    if isinstance(result, Answered):
        ctx.metrics.commands.labels("true").inc()
        return result.text
    if not result.duplicate:
        ctx.metrics.messages.inc()
    return None


def follow_up(
    rest: DiscordRest,
    interaction: Interaction,
    answer: Callable[[], str],
    *,
    sleep: Callable[[float], None] = pause,
) -> None:
    """Compute the deferred answer and put it in place of "thinking…" (``PATCH …/@original``);
    parts past Discord's 2,000 characters follow as ephemeral follow-up messages. A failure is
    logged: the command has been applied (``/heartbeat status`` shows its state)."""
    try:
        text = answer()
    except Exception:
        log.exception("a Discord command failed", extra={"action": "discord.command_failed"})
        text = "The command failed inside the gateway; nothing was changed. Try it again."
    base = f"/webhooks/{segment(interaction.application_id)}/{segment(interaction.token)}"
    first, *rest_parts = split_text(text, 2000)
    edit = Route(
        "PATCH",
        "PATCH /webhooks/{id}/{token}/messages/@original",
        base,
        f"{base}/messages/@original",
    )
    try:
        _edit_original(rest, edit, first, sleep)
        for part in rest_parts:
            more = Route("POST", "POST /webhooks/{id}/{token}", base, base)
            body = {"content": part, "allowed_mentions": NO_PINGS, "flags": EPHEMERAL}
            rest.call(more, body, bot=False)
    except DeliveryFailed as exc:
        log.warning(
            "the answer to a Discord command was not posted: %s",
            exc,
            extra={"action": "discord.answer_failed"},
        )


def _edit_original(
    rest: DiscordRest, route: Route, content: str, sleep: Callable[[float], None]
) -> None:
    body = {"content": content, "allowed_mentions": NO_PINGS}
    for attempt in range(1, FOLLOW_UP_ATTEMPTS + 1):
        try:
            rest.call(route, body, bot=False)
            return
        except DeliveryFailed as exc:
            if exc.reason not in ("unknown_webhook", "unknown_message", "http_404"):
                raise
            if attempt == FOLLOW_UP_ATTEMPTS:
                raise
        sleep(FOLLOW_UP_PAUSE)
