"""`hbgw telegram …`: register the bot's webhook, remove it, or poll for updates instead.

Each needs HBGW_TELEGRAM_BOT_TOKEN and HBGW_TELEGRAM_SECRET_TOKEN; Telegram's refusals and
silences come back as one sentence (exit 2 for what a person must change, 1 for no answer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from hbgw.cli.common import out, settings
from hbgw.cli.help import Command, Group
from hbgw.core.errors import BadInput, HbgwError

if TYPE_CHECKING:
    from hbgw.core.settings import Settings
    from hbgw.gateway.platforms.telegram.api import BotApi

app = typer.Typer(
    cls=Group, help="Telegram: set or delete the bot's webhook, or poll for its messages."
)

WEBHOOK_PATH = "/platforms/telegram/webhook"
ALLOWED_UPDATES = ["message"]


def _configured() -> Settings:
    s = settings()
    if not s.telegram_configured:
        raise BadInput(
            "Telegram is not configured: set HBGW_TELEGRAM_BOT_TOKEN (from BotFather) and "
            "HBGW_TELEGRAM_SECRET_TOKEN (a secret of your choice, e.g. openssl rand -hex 32)."
        )
    return s


def _api(s: Settings) -> BotApi:
    from hbgw.gateway.platforms.telegram.api import BotApi

    token = s.telegram_bot_token
    assert token is not None
    return BotApi(token.get_secret_value(), base_url=s.telegram_api_url, timeout=s.telegram_timeout)


def _call(s: Settings, method: str, params: dict[str, Any]) -> Any:
    from hbgw.gateway.platforms.telegram.api import Refused, Unreachable

    api = _api(s)
    try:
        return api.call(method, params)
    except Refused as refused:
        raise BadInput(f"Telegram refused {method}: {refused.description}.") from None
    except Unreachable as exc:
        raise HbgwError(
            f"Telegram's Bot API at {s.telegram_api_url} did not answer ({exc}); check "
            "HBGW_TELEGRAM_API_URL and the network, then try again."
        ) from None
    finally:
        api.close()


def webhook_url(url: str) -> str:
    """The webhook's URL: the gateway's public address, with the webhook's path if none given."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise BadInput(
            f"{url!r} is not a URL; give the gateway's public address, like "
            f"https://hbgw.example.com (Telegram posts to {WEBHOOK_PATH} there)."
        )
    if parts.path in ("", "/"):
        return url.strip().rstrip("/") + WEBHOOK_PATH
    return url.strip()


@app.command(cls=Command, name="set-webhook")
def set_webhook(
    url: str = typer.Argument(
        ..., metavar="URL", help=f"The gateway's public HTTPS address (…{WEBHOOK_PATH} added)."
    ),
) -> None:
    """Register URL as the bot's webhook (setWebhook), with the secret token, for messages."""
    s = _configured()
    target = webhook_url(url)
    secret = s.telegram_secret_token
    assert secret is not None
    params = {
        "url": target,
        "secret_token": secret.get_secret_value(),
        "allowed_updates": ALLOWED_UPDATES,
    }
    _call(s, "setWebhook", params)
    out(
        f"Telegram will post this bot's messages to {target}, each with the secret token; the "
        "gateway there must run with the same HBGW_TELEGRAM_SECRET_TOKEN."
    )


@app.command(cls=Command, name="delete-webhook")
def delete_webhook() -> None:
    """Remove the bot's webhook (deleteWebhook), so that `hbgw telegram poll` can fetch."""
    _call(_configured(), "deleteWebhook", {})
    out(
        "The webhook is removed: Telegram keeps the bot's messages until `hbgw telegram poll` "
        "fetches them, or a webhook is set again."
    )


@app.command(cls=Command)
def poll(
    wait: int = typer.Option(
        25, "--wait", min=1, max=50, metavar="SECONDS", help="How long one getUpdates may wait."
    ),
) -> None:
    """Fetch the bot's messages by long polling (getUpdates), no public URL needed; Ctrl-C
    stops. The webhook must be deleted first (`hbgw telegram delete-webhook`)."""
    import signal

    from hbgw.core.logs import configure_logging

    s = _configured()
    configure_logging(s)
    # SIGTERM (a supervisor, `docker stop`) stops it like Ctrl-C, even inside a long poll. SIGINT
    # is set too: a process started in the background by a script (`hbgw telegram poll &`)
    # inherits SIGINT ignored, and Python then keeps ignoring it, so Ctrl-C or `kill -INT`
    # stopped nothing.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _run_poller(s, wait)


def _run_poller(s: Settings, wait: int) -> None:
    from hbgw.celery_app import make_celery
    from hbgw.gateway.api.context import build_context
    from hbgw.gateway.platforms.guard import SeenEvents
    from hbgw.gateway.platforms.telegram.channel import TelegramChannel
    from hbgw.gateway.platforms.telegram.inbound import TelegramBot
    from hbgw.gateway.platforms.telegram.polling import Poller
    from hbgw.state.runtime import resolve_redis_url

    try:
        redis_url: str | None = resolve_redis_url(s)
    except HbgwError:
        redis_url = None  # messages are stored all the same; the restore pass hands them over
    celery = make_celery(s, redis_url) if redis_url else None
    ctx = build_context(s, celery_app=celery, clock=None, redis_url=redis_url)
    bot = TelegramBot(s, TelegramChannel.from_settings(s), SeenEvents(ctx.redis, "telegram"))
    poller = Poller(ctx, bot, wait=wait)
    out("Polling Telegram for the bot's messages; Ctrl-C stops.")
    try:
        poller.run()
    except KeyboardInterrupt:
        out(f"Stopped polling; {poller.taken} updates taken.")
    finally:
        bot.channel.api.close()
        ctx.close()
