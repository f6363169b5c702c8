"""The application commands the gateway answers, and registering them with Discord
(``hbgw discord register-commands``: ``PUT /applications/{id}/commands``, or a guild's).

``/heartbeat`` takes one string option, ``text``, the rest of a /heartbeat command line
(``every 15m check the deploy``, ``cron 0 9 * * 1-5 …``, ``status``, ``pause``, ``resume``,
``clear``): one grammar for every platform, with its error sentences, rather than Discord
subcommands that would spell a second one. ``/hb`` is the same command. ``/ask`` and the
message command *Ask the agent* carry user messages (``interactions.py`` says why).

A PUT replaces the application's whole command set (global, or the guild's): running it again
is harmless, and a command removed here disappears from Discord.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hbgw.core.errors import BadInput, DeliveryFailed, HbgwError
from hbgw.core.settings import Settings
from hbgw.gateway.platforms.discord.interactions import ASK_MESSAGE_NAME, ASK_NAME, TEXT_OPTION
from hbgw.gateway.platforms.discord.rest import DiscordRest, Route, segment

CHAT_INPUT, MESSAGE = 1, 3  # application command types
STRING = 3  # option type
GUILD, BOT_DM = 0, 1  # interaction contexts the commands are offered in
GUILD_INSTALL = 0
HEARTBEAT_HELP = "every 15m <prompt> · cron 0 9 * * 1-5 <prompt> · status · pause · resume · clear"
CRON_HELP = (
    "add in 10m -- <prompt> · add every 2h -- <prompt> · list · show, pause, resume, cancel ID"
)


def _slash(name: str, description: str, option: str, *, required: bool) -> dict[str, Any]:
    return {
        "name": name,
        "type": CHAT_INPUT,
        "description": description,
        "options": [
            {
                "type": STRING,
                "name": TEXT_OPTION,
                "description": option,
                "required": required,
                "max_length": 6000,
            }
        ],
        "contexts": [GUILD, BOT_DM],
        "integration_types": [GUILD_INSTALL],
    }


def definitions() -> list[dict[str, Any]]:
    heartbeat = "Set, show, pause, resume or clear this channel's (or thread's) heartbeat"
    return [
        _slash("heartbeat", heartbeat, HEARTBEAT_HELP, required=False),
        _slash("hb", heartbeat, HEARTBEAT_HELP, required=False),
        _slash(
            "cron", "Add, list or change the cron jobs that post here", CRON_HELP, required=False
        ),
        _slash(ASK_NAME, "Ask the agent of this channel or thread", "Your message", required=True),
        {
            "name": ASK_MESSAGE_NAME,
            "type": MESSAGE,
            "contexts": [GUILD, BOT_DM],
            "integration_types": [GUILD_INSTALL],
        },
    ]


@dataclass(frozen=True)
class Registered:
    names: tuple[str, ...]
    where: str  # "globally" or "in guild <id>"


def register(settings: Settings, guild: str | None = None) -> Registered:
    """Replace the application's commands (a guild's, when given) with ``definitions()``."""
    token, app = settings.discord_bot_token, settings.discord_application_id
    if token is None or app is None:
        raise BadInput(
            "Set HBGW_DISCORD_BOT_TOKEN and HBGW_DISCORD_APPLICATION_ID (and "
            "HBGW_DISCORD_PUBLIC_KEY) to register the Discord commands."
        )
    if guild is not None and not guild.isdigit():
        raise BadInput(f"--guild {guild} is not a guild id; copy it with Developer Mode on.")
    path = f"/applications/{segment(app)}/commands"
    if guild is not None:
        path = f"/applications/{segment(app)}/guilds/{segment(guild)}/commands"
    route = Route("PUT", path.replace(app, "{app}"), app, path)
    rest = DiscordRest(
        token.get_secret_value(),
        base_url=settings.discord_api_url,
        timeout=settings.discord_timeout,
    )
    try:
        answer = rest.call(route, definitions())
    except DeliveryFailed as exc:
        raise _refusal(exc, guild, settings.discord_api_url) from exc
    finally:
        rest.close()
    assert answer is not None
    found = answer.json()
    names = (
        tuple(str(c.get("name")) for c in found if isinstance(c, dict))
        if isinstance(found, list)
        else ()
    )
    return Registered(names, f"in guild {guild}" if guild else "globally")


def _refusal(exc: DeliveryFailed, guild: str | None, url: str) -> HbgwError:
    """What to do about a refused registration, in the words of its cause."""
    reason = exc.reason
    if reason == "http_401":
        return BadInput(
            "Discord refused the bot token (401); copy it again from Bot → Reset Token."
        )
    if reason in ("missing_access", "http_403"):
        where = f"guild {guild}" if guild else "this application"
        return BadInput(
            f"Discord refused to register commands for {where} (403): invite the bot with the "
            "applications.commands scope, and check HBGW_DISCORD_APPLICATION_ID."
        )
    if reason == "http_404" or reason.startswith("unknown"):
        return BadInput(
            "Discord knows no such application (404): check HBGW_DISCORD_APPLICATION_ID."
        )
    if reason == "unreachable":
        return HbgwError(
            f"Discord's API at {url} did not answer; check HBGW_DISCORD_API_URL and the network."
        )
    return HbgwError(f"Discord did not register the commands ({reason}); try again in a minute.")
