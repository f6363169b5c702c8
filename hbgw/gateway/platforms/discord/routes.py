"""``POST /platforms/discord/interactions``: the application's interactions endpoint; mounted
only when Discord's settings are present.

Order for every request: the body is already bounded (HBGW_API_MAX_BODY_BYTES, 413), then the
Ed25519 signature and the replay window (401 — Discord checks the endpoint by sending bad
signatures and expects exactly that), then the body is parsed (400 for a shape Discord does not
send), then the guild allowlist (403): nothing is stored, and no key written, for a request that
fails one of them. A PING is answered with a PONG. An interaction's id is remembered (Redis, an
hour), so the same interaction delivered twice is taken once; a failure forgets it.

Discord wants the answer within 3 s. ``/heartbeat`` is answered at once with a deferred,
ephemeral response ("thinking…", seen by its author only); the command is applied after the
response and its sentence replaces "thinking…" (``inbound.follow_up``), so a slow store never
costs the answer. ``/ask`` stores its message before answering (SQL is the truth, as for every
edge) — one insert, well within the 3 s — and answers with the question, quoted, so the channel
sees what the reply that a worker posts next answers.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, BackgroundTasks, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from hbgw.gateway.api.context import ApiContext, context
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.platforms.discord.channel import DiscordChannel
from hbgw.gateway.platforms.discord.inbound import follow_up, take_heartbeat, take_message
from hbgw.gateway.platforms.discord.interactions import (
    ASK_MESSAGE_NAME,
    ASK_NAME,
    PLATFORM,
    Interaction,
    Kind,
    deferred,
    pong,
    quoted,
    read_interaction,
    said,
    usage,
)
from hbgw.gateway.platforms.discord.signature import DiscordSignature
from hbgw.gateway.platforms.guard import InboundRejects, Reject, SeenEvents, read_json, unsigned

log = logging.getLogger("hbgw.discord")


class DiscordEdge:
    """The Discord application's parts in one API process."""

    def __init__(
        self,
        guilds: frozenset[str],
        signature: DiscordSignature,
        channel: DiscordChannel,
        seen: SeenEvents,
        rejects: InboundRejects,
    ) -> None:
        self.guilds = guilds
        self.signature = signature
        self.channel = channel
        self.seen = seen
        self.rejects = rejects

    async def verified(self, request: Request) -> bytes:
        """The body, if the application signed it just now; else an ApiError (401)."""
        body = await request.body()
        problem = self.signature.problem(request.headers, body)
        if problem is not None:
            raise unsigned(
                self.rejects,
                PLATFORM,
                problem,
                stale="The request is older than five minutes; Discord signs every interaction "
                "anew.",
                forged="The request does not carry a valid Discord signature.",
            )
        return body

    def check_guild(self, interaction: Interaction) -> None:
        if self.guilds and interaction.guild not in self.guilds:
            self.rejects.count(PLATFORM, Reject.TEAM)
            raise ApiError(
                403, "forbidden", "This server is not served here (HBGW_DISCORD_GUILDS)."
            )

    def malformed(self) -> ApiError:
        self.rejects.count(PLATFORM, Reject.MALFORMED)
        return ApiError(400, "invalid_input", "The request is not a Discord interaction.")


def edge(request: Request) -> DiscordEdge:
    found = request.app.state.discord
    assert isinstance(found, DiscordEdge)
    return found


router = APIRouter(prefix="/platforms/discord", tags=["discord"])


@router.post("/interactions", response_model=None)
async def interactions(request: Request, background: BackgroundTasks) -> JSONResponse:
    """Discord's interactions: PING answered, the gateway's application commands taken."""
    discord = edge(request)
    body = await discord.verified(request)
    try:
        payload = read_json(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise discord.malformed()
    if payload.get("type") == Kind.PING:
        return JSONResponse(pong())
    interaction = (
        read_interaction(payload) if payload.get("type") == Kind.APPLICATION_COMMAND else None
    )
    if interaction is None:
        raise discord.malformed()  # components, autocomplete, modals: this app sends none
    discord.check_guild(interaction)
    if not await run_in_threadpool(discord.seen.first, interaction.id):
        log.info(
            "Discord interaction %s seen before",
            interaction.id,
            extra={"action": "discord.interaction_repeat"},
        )
        return JSONResponse(deferred(ephemeral=True))
    try:
        return JSONResponse(await _answer(context(request), discord, interaction, background))
    except BaseException:
        await run_in_threadpool(discord.seen.forget, interaction.id)  # a repeat must be taken
        raise


async def _answer(
    ctx: ApiContext, discord: DiscordEdge, interaction: Interaction, background: BackgroundTasks
) -> dict[str, Any]:
    if interaction.is_command:
        background.add_task(
            follow_up, discord.channel.rest, interaction, lambda: _apply(ctx, discord, interaction)
        )
        return deferred(ephemeral=True)
    if interaction.name in (ASK_NAME, ASK_MESSAGE_NAME):
        refusal = await run_in_threadpool(take_message, ctx, interaction)
        if refusal is not None:
            return said(refusal, ephemeral=True)
        return said(quoted(interaction.text), ephemeral=False)
    return said(usage(), ephemeral=True)


def _apply(ctx: ApiContext, discord: DiscordEdge, interaction: Interaction) -> str:
    """The deferred command, after the response: when it fails, a repeat must be taken."""
    try:
        return take_heartbeat(ctx, interaction)
    except BaseException:
        discord.seen.forget(interaction.id)
        raise


def mount(app: FastAPI, ctx: ApiContext) -> None:
    """Serve Discord's endpoint on ``app`` (called only when Discord's settings are present)."""
    settings = ctx.settings
    key = settings.discord_public_key
    assert key is not None
    app.state.discord = DiscordEdge(
        settings.discord_guild_ids,
        DiscordSignature(key, ctx.clock),
        DiscordChannel.from_settings(settings),
        SeenEvents(ctx.redis, PLATFORM),
        ctx.metrics.inbound_rejects,
    )
    app.include_router(router)
