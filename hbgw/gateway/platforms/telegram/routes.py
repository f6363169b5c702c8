"""``POST /platforms/telegram/webhook``: the updates Telegram posts to the URL that
``hbgw telegram set-webhook`` registered; mounted only when Telegram's settings are present.

Order for every request: the body is already bounded (HBGW_API_MAX_BODY_BYTES, 413), then the
header ``X-Telegram-Bot-Api-Secret-Token`` is compared with HBGW_TELEGRAM_SECRET_TOKEN in
constant time (401) — before the body is read — and only then is the body parsed (400 for a
shape Telegram does not send). Nothing is stored, and no key written, for a request that fails
one of them. Telegram repeats an update until it gets a 2xx, so an update is answered 200 as
soon as its message is stored and handed to a worker (the reply comes later, from the worker);
a command's answer is posted after the response. A repeated ``update_id`` is answered 200 and
dropped (``inbound.py``); a failure answers 500 and forgets it, so the repeat is taken.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, BackgroundTasks, FastAPI, Request
from starlette.concurrency import run_in_threadpool

from hbgw.gateway.api.context import ApiContext, context
from hbgw.gateway.api.errors import ApiError
from hbgw.gateway.platforms.guard import InboundRejects, Reject, SeenEvents, read_json
from hbgw.gateway.platforms.telegram.channel import TelegramChannel
from hbgw.gateway.platforms.telegram.inbound import TelegramBot
from hbgw.gateway.platforms.telegram.updates import PLATFORM, update_id

SECRET_HEADER = "x-telegram-bot-api-secret-token"


class SecretToken:
    def __init__(self, secret: str) -> None:
        self.expected = secret.encode()

    def matches(self, headers: Mapping[str, str]) -> bool:
        """Whether the request carries the secret; the comparison takes the same time however
        much of a wrong guess is right."""
        given = headers.get(SECRET_HEADER, "").encode("utf-8", "replace")
        return hmac.compare_digest(given, self.expected)


class TelegramEdge:
    """The bot's webhook parts in one API process."""

    def __init__(self, secret: SecretToken, bot: TelegramBot, rejects: InboundRejects) -> None:
        self.secret = secret
        self.bot = bot
        self.rejects = rejects

    def check(self, request: Request) -> None:
        if not self.secret.matches(request.headers):
            self.rejects.count(PLATFORM, Reject.SIGNATURE)
            raise ApiError(
                401,
                "unauthorized",
                "The request does not carry this bot's secret token "
                "(X-Telegram-Bot-Api-Secret-Token).",
            )

    def malformed(self) -> ApiError:
        self.rejects.count(PLATFORM, Reject.MALFORMED)
        return ApiError(400, "invalid_input", "The request is not a Telegram update.")


def edge(request: Request) -> TelegramEdge:
    found = request.app.state.telegram
    assert isinstance(found, TelegramEdge)
    return found


router = APIRouter(prefix="/platforms/telegram", tags=["telegram"])


@router.post("/webhook", response_model=None)
async def webhook(request: Request, background: BackgroundTasks) -> dict[str, Any]:
    """One Telegram update: a message taken, a /heartbeat command applied and answered."""
    telegram = edge(request)
    telegram.check(request)  # the header only: nothing of the body is read before it
    body = await request.body()
    try:
        payload = read_json(body)
    except ValueError:
        payload = None
    if update_id(payload) is None:
        raise telegram.malformed()
    answer = await run_in_threadpool(telegram.bot.take, context(request), payload)
    if answer is not None:
        background.add_task(telegram.bot.post, answer)
    return {"ok": True}


def mount(app: FastAPI, ctx: ApiContext) -> None:
    """Serve Telegram's webhook on ``app`` (called only when Telegram's settings are present)."""
    settings = ctx.settings
    secret = settings.telegram_secret_token
    assert secret is not None
    rejects = ctx.metrics.inbound_rejects
    channel = TelegramChannel.from_settings(settings)
    bot = TelegramBot(settings, channel, SeenEvents(ctx.redis, PLATFORM), rejects)
    app.state.telegram = TelegramEdge(SecretToken(secret.get_secret_value()), bot, rejects)
    app.include_router(router)
