"""``POST /platforms/slack/events`` (the Events API) and ``POST /platforms/slack/commands`` (the
``/hbgw`` slash command); mounted only when Slack's settings are present.

Order for every request: the body is already bounded (HBGW_API_MAX_BODY_BYTES, 413), then the
signature and the replay window (401), then the workspace allowlist (403), and only then is the
body parsed (400 for a shape Slack does not send) — nothing is stored, and no key written,
for a request that fails one of them. An event's ``event_id`` is remembered (Redis, an hour) so
Slack's retries (``X-Slack-Retry-Num``) are answered 200 and dropped; a failure forgets it, so
the retry is taken. A slash command has no event id: the digest of its signed timestamp and
body (``signature.request_id``) is remembered the same way, so a replay within the window is
answered ``TAKEN_BEFORE`` and applies nothing. Slack wants a 200 within 3 s: an event stores
its message and hands it to a worker (the turn's reply comes later, from the worker); a
command's answer in a thread is posted after the response.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, BackgroundTasks, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from hbgw.core.settings import Settings
from hbgw.gateway.api.context import ApiContext, context
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.platforms.guard import InboundRejects, Reject, SeenEvents, read_json, unsigned
from hbgw.gateway.platforms.slack.channel import SlackChannel, escape
from hbgw.gateway.platforms.slack.events import PLATFORM, read_command
from hbgw.gateway.platforms.slack.inbound import post_answer, take_command, take_event
from hbgw.gateway.platforms.slack.signature import SlackSignature, request_id

log = logging.getLogger("hbgw.slack")

COMMAND_NAME = "/hbgw"
# The slash command's answer is seen by the person who typed it only: the channel sees the
# heartbeat's own posts, not the commands that set it.
COMMAND_RESPONSE_TYPE = "ephemeral"
# A replayed slash command (the same signed request again, within the replay window).
TAKEN_BEFORE = (
    "This command was taken already (the same request came again); nothing more was done."
)


class SlackEdge:
    """The Slack app's parts in one API process."""

    def __init__(
        self,
        settings: Settings,
        signature: SlackSignature,
        channel: SlackChannel,
        seen: SeenEvents,
        rejects: InboundRejects,
    ) -> None:
        self.signature = signature
        self.channel = channel
        self.seen = seen
        self.rejects = rejects
        self.teams = settings.slack_team_ids

    async def verified(self, request: Request) -> bytes:
        """The body, if Slack signed it just now from an allowed workspace; else an ApiError."""
        body = await request.body()
        problem = self.signature.problem(request.headers, body)
        if problem is not None:
            raise unsigned(
                self.rejects,
                PLATFORM,
                problem,
                stale="The request is older than five minutes; Slack signs every request anew.",
                forged="The request does not carry a valid Slack signature.",
            )
        return body

    def check_team(self, team: str) -> None:
        if self.teams and team not in self.teams:
            self.rejects.count(PLATFORM, Reject.TEAM)
            raise ApiError(
                403, "forbidden", "This workspace is not served here (HBGW_SLACK_TEAMS)."
            )

    def malformed(self, what: str) -> ApiError:
        self.rejects.count(PLATFORM, Reject.MALFORMED)
        return ApiError(400, "invalid_input", f"The request is not a Slack {what}.")


def edge(request: Request) -> SlackEdge:
    found = request.app.state.slack
    assert isinstance(found, SlackEdge)
    return found


router = APIRouter(prefix="/platforms/slack", tags=["slack"])


@router.post("/events", response_model=None)
async def events(request: Request, background: BackgroundTasks) -> dict[str, Any]:
    """Slack's Events API: ``url_verification`` answered, ``event_callback`` messages taken."""
    slack = edge(request)
    body = await slack.verified(request)
    try:
        payload = read_json(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise slack.malformed("event")
    kind = payload.get("type")
    if kind == "url_verification":
        return {"challenge": str(payload.get("challenge", ""))}
    slack.check_team(str(payload.get("team_id", "")))
    event_id = payload.get("event_id")
    if kind != "event_callback" or not isinstance(event_id, str) or not event_id:
        return {"ok": True}  # app_rate_limited and the like: nothing to take
    if not await run_in_threadpool(slack.seen.first, event_id):
        log.info(
            "Slack event %s seen before (retry %s)",
            event_id,
            request.headers.get("x-slack-retry-num", "?"),
            extra={"action": "slack.event_repeat"},
        )
        return {"ok": True, "duplicate": True}
    ctx = context(request)
    try:
        answer = await run_in_threadpool(take_event, ctx, payload)
    except BaseException:
        await run_in_threadpool(slack.seen.forget, event_id)  # the retry must be taken
        raise
    if answer is not None:
        background.add_task(post_answer, slack.channel, answer)
    return {"ok": True}


@router.post("/commands", response_model=None)
async def commands(request: Request) -> JSONResponse:
    """The ``/hbgw heartbeat …`` (or ``/hbgw hb …``) slash command, answered in the response."""
    slack = edge(request)
    body = await slack.verified(request)
    try:
        form = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=64)
    except (UnicodeDecodeError, ValueError):
        raise slack.malformed("slash command") from None
    if form.get("ssl_check") == ["1"]:
        return JSONResponse({"ok": True})  # Slack checking the certificate
    command = read_command(form)
    if command is None:
        raise slack.malformed("slash command")
    slack.check_team(command.team)
    taken = request_id(request.headers, body)
    if not await run_in_threadpool(slack.seen.first, taken):
        log.info("Slack command %s seen before", taken, extra={"action": "slack.command_repeat"})
        return JSONResponse({"response_type": COMMAND_RESPONSE_TYPE, "text": TAKEN_BEFORE})
    name = (form.get("command") or [COMMAND_NAME])[0]
    try:
        reply = await run_in_threadpool(take_command, context(request), command, name)
    except BaseException:
        await run_in_threadpool(slack.seen.forget, taken)  # not taken: a retry must be
        raise
    shown = reply if slack.channel.allow_mentions else escape(reply)  # it echoes the prompt
    return JSONResponse({"response_type": COMMAND_RESPONSE_TYPE, "text": shown})


def mount(app: FastAPI, ctx: ApiContext) -> None:
    """Serve Slack's endpoints on ``app`` (called only when Slack's settings are present)."""
    settings = ctx.settings
    secret = settings.slack_signing_secret
    assert secret is not None
    app.state.slack = SlackEdge(
        settings,
        SlackSignature(secret.get_secret_value(), ctx.clock),
        SlackChannel.from_settings(settings),
        SeenEvents(ctx.redis, PLATFORM),
        ctx.metrics.inbound_rejects,
    )
    app.include_router(router)
