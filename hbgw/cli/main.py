"""The `hbgw` command. Exit codes: 0 ok, 2 bad input (message on stderr), 1 unexpected failure.

Each command imports what it uses in its own body: `hbgw --help` and `hbgw config` must not pay
for Celery, SQLAlchemy and Redis (tests/integration/test_cli_surface.py checks which modules load).
"""

from __future__ import annotations

import os
import sys
import traceback
from datetime import UTC
from typing import TYPE_CHECKING

import typer

from hbgw.cli import (
    api_cmd,
    chat_cmd,
    cron_cmd,
    discord_cmd,
    heartbeat_cmd,
    live_cmd,
    ops_cmd,
    session_cmd,
    telegram_cmd,
)
from hbgw.cli.common import err, limits, now, open_store, out, out_json, sentence, settings
from hbgw.cli.help import INSPECT, OPERATE, RUN, TALK, Command, Group
from hbgw.core.errors import HbgwError

if TYPE_CHECKING:
    from hbgw.sessions.store.run_views import RunView

PACKAGE = "heartbeat-gateway"


class Root(Group):
    order = (
        "up",
        "demo",
        "worker",
        "beat",
        "api",
        "flower",
        "session",
        "heartbeat",
        "cron",
        "send",
        "chat",
        "watch",
        "runs",
        "config",
    )


app = typer.Typer(
    cls=Root,
    name="hbgw",
    help="Heartbeat Gateway: recurring /heartbeat instructions for chat-agent sessions.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version

        out(f"hbgw {version(PACKAGE)}")
        raise typer.Exit()


@app.callback()
def root(
    _version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print the installed version and exit.",
    ),
) -> None:
    pass


def config() -> None:
    """Print the effective settings (secrets masked)."""
    for name, value in settings().masked().items():
        out(f"HBGW_{name.upper()}={'' if value is None else value}")


def migrate() -> None:
    """Upgrade the database schema to this version."""
    from hbgw.sessions.db import current_revision, head_revision, make_engine, upgrade

    engine = make_engine(settings().effective_database_url)
    before = current_revision(engine)
    upgrade(engine)
    after = current_revision(engine)
    out(f"Database schema at {after} (was {before or 'empty'}).")
    engine.dispose()
    if after != head_revision(engine):
        raise HbgwError("The migration did not reach the head revision.")


def send(
    session_id: str = typer.Argument(..., metavar="SESSION", help="Session id."),
    text: list[str] = typer.Argument(..., metavar="TEXT…", help="The message, or a /heartbeat."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Return once the message is queued."),
    timeout: float = typer.Option(
        60.0, "--timeout", metavar="SECONDS", help="Seconds to wait for the reply."
    ),
    idempotency_key: str | None = typer.Option(
        None,
        "--idempotency-key",
        metavar="KEY",
        help="Send a retry with the same KEY: it gets the first message, not a second one.",
    ),
) -> None:
    """Send a message as the session's user and print the reply.

    /heartbeat commands are answered at once; other text runs a turn on the owning worker.
    Once stored the message is answered, even when Redis is down: that is exit 0 too.
    """
    from hbgw.cli.gateway_ctx import gateway_runtime
    from hbgw.cli.send_out import print_reply, queued_sentence, reply_or_hold
    from hbgw.gateway.inbound import Answered, InboundParts, receive
    from hbgw.sessions.validation import message_limits_from_settings

    with gateway_runtime() as (store, rt, dispatcher):
        result = receive(
            store,
            session_id,
            " ".join(text),
            rt.clock() if rt is not None else now(),
            limits(),
            parts=InboundParts.of(rt) if rt is not None else None,
            dispatcher=dispatcher,
            idempotency_key=idempotency_key,
            message_limits=message_limits_from_settings(settings()),
        )
        if isinstance(result, Answered):
            out(result.text)
            return
        if result.duplicate:
            reply = store.messages.reply_for(result.message_id)
            if reply is not None and not no_wait:
                print_reply(reply)
                return
        if rt is None or not result.handed_off or (result.duplicate and no_wait):
            out(queued_sentence(result, redis_reachable=rt is not None))
            return
        reply_or_hold(store.messages, rt.redis, result, None if no_wait else timeout)


def runs(
    session_id: str = typer.Argument(..., metavar="SESSION", help="Session id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the fire ledger of a session — its heartbeat's runs and its cron jobs' — with the
    tokens each turn spent and how its delivery ended."""
    from hbgw.cli.common import aligned, delivery_cell, delivery_error
    from hbgw.core.clock import iso

    store = open_store()
    store.sessions.get_session(session_id)  # an unknown session is bad input, like everywhere else
    rows = store.ledger.runs(session_id)
    if as_json:
        out_json([r.to_json() for r in rows])
        return
    if not rows:
        out(f"No runs (heartbeat or cron job) for session {session_id} yet.")
        return
    table = [["fire id", "state", "fence", "reserved", "started", "tokens in+out", "delivery"]]
    details = ["detail"]
    for r in rows:
        usage = r.usage
        tokens = f"{usage.prompt_tokens}+{usage.completion_tokens}" if usage else "-"
        reserved, started = iso(r.reserved_at) or "", iso(r.started_at) or "-"
        cells = [r.fire_id, str(r.state), str(r.fence), reserved, started, tokens]
        table.append([*cells, delivery_cell(r.delivery)])
        details.append(r.detail or delivery_error(r.delivery))
    aligned(table, details, numeric=frozenset({2}))  # the fence is a number
    per_day = tokens_per_day(rows)
    if per_day:
        out(f"Heartbeat tokens per UTC day (its budget counts these): {per_day}")


def tokens_per_day(rows: list[RunView]) -> str:
    """``2026-12-02 12,345, …``: the heartbeat runs' tokens by the UTC day they were reserved."""
    days: dict[str, int] = {}
    for r in rows:
        if r.job_id is None and r.usage is not None:
            day = r.reserved_at.astimezone(UTC).date().isoformat()
            days[day] = days.get(day, 0) + r.usage.total_tokens
    return ", ".join(f"{day} {tokens:,}" for day, tokens in sorted(days.items()))


# `hbgw --help` shows one panel per kind of use: start the processes, talk to sessions as a user
# would, look at what happened, and operator switches.
app.add_typer(session_cmd.app, name="session", rich_help_panel=TALK)
app.add_typer(heartbeat_cmd.app, name="heartbeat", rich_help_panel=TALK)
app.add_typer(cron_cmd.app, name="cron", rich_help_panel=TALK)
EPILOGS: dict[object, str] = {
    send: (
        "Exit codes: 0 the reply (or queued, with --no-wait); 1 the send failed; 2 bad input; "
        "3 queued, an emergency stop holds it; 4 queued, no reply within --timeout (it will be "
        "answered: see `hbgw chat SESSION`); 5 the turn failed (its notice is printed)."
    ),
}
for _command, _panel in (
    (ops_cmd.up, RUN),
    (ops_cmd.demo, RUN),
    (ops_cmd.worker, RUN),
    (ops_cmd.beat, RUN),
    (api_cmd.api, RUN),
    (ops_cmd.flower, RUN),
    (send, TALK),
    (chat_cmd.chat, TALK),
    (chat_cmd.watch, TALK),
    (runs, INSPECT),
    (config, INSPECT),
    (live_cmd.agents, INSPECT),
    (migrate, OPERATE),
    (ops_cmd.estop, OPERATE),
    (live_cmd.stamp, OPERATE),
):
    app.command(cls=Command, rich_help_panel=_panel, epilog=EPILOGS.get(_command))(_command)
app.add_typer(telegram_cmd.app, name="telegram", rich_help_panel=OPERATE)
app.add_typer(discord_cmd.app, name="discord", rich_help_panel=OPERATE)


def main(argv: list[str] | None = None) -> None:
    """Entry point: typed errors become one sentence on stderr and an exit code."""
    run(app, argv)


def run(cli: typer.Typer, argv: list[str] | None) -> None:
    command = typer.main.get_command(cli)
    try:
        # Standalone mode: usage errors print their own message and exit 2.
        command.main(args=argv, prog_name="hbgw", standalone_mode=True)
    except HbgwError as exc:
        err(f"Error: {sentence(exc)}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("HBGW_DEBUG"):
            traceback.print_exc()
        err(
            f"Unexpected failure: {exc.__class__.__name__}: {' '.join(str(exc).split())} "
            "(set HBGW_DEBUG=1 for the traceback)."
        )
        sys.exit(1)
