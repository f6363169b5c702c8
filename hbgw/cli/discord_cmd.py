"""`hbgw discord …`: what the Discord application needs from outside the gateway."""

from __future__ import annotations

import typer

from hbgw.cli.common import out, settings
from hbgw.cli.help import Command, Group

app = typer.Typer(cls=Group, help="Set up the Discord application: register its commands.")


@app.command(cls=Command, name="register-commands")
def register_commands(
    guild: str | None = typer.Option(
        None,
        "--guild",
        metavar="ID",
        help="Register in this guild only (they appear at once; global ones can take a while).",
    ),
) -> None:
    """Register /heartbeat, /hb, /cron, /ask and "Ask the agent" with the Discord application.

    They replace the application's commands (globally, or in the --guild). Needs
    HBGW_DISCORD_BOT_TOKEN and HBGW_DISCORD_APPLICATION_ID.
    """
    from hbgw.gateway.platforms.discord.commands import register

    done = register(settings(), guild)
    out(f"Registered {', '.join(done.names) or 'no commands'} {done.where}.")
