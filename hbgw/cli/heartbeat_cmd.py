"""`hbgw heartbeat …`: the /heartbeat commands, for operators and scripts."""

from __future__ import annotations

import typer

from core.errors import BadInput
from hbgw.cli.common import limits, now, open_store, out, out_json
from hbgw.cli.gateway_ctx import sync_index
from sessions import replies
from sessions.grammar import (
    Clear,
    IntervalSchedule,
    Pause,
    Resume,
    Schedule,
    SetHeartbeat,
    check_prompt,
    parse_cron,
    parse_interval,
)
from sessions.heartbeat_commands import apply_command

app = typer.Typer(help="Show, set, pause, resume or clear the heartbeat of a session.")

SESSION = typer.Argument(..., metavar="SESSION", help="Session id.")


@app.command()
def status(
    session_id: str = SESSION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Prompt, schedule, next fire time, fires so far and last outcome."""
    result = open_store().heartbeat_status(session_id, now())
    if as_json:
        out_json(result.to_json())
    else:
        out(replies.status_reply(result))


@app.command("set")
def set_(
    session_id: str = SESSION,
    prompt: list[str] = typer.Argument(..., metavar="PROMPT…", help="The recurring instruction."),
    every: str | None = typer.Option(
        None, "--every", help="Interval such as 10m, 1.5h, 90 minutes."
    ),
    cron: str | None = typer.Option(None, "--cron", help="Five cron fields or @hourly/@daily/…"),
    tz: str | None = typer.Option(None, "--tz", help="IANA timezone of --cron, e.g. Asia/Tokyo."),
) -> None:
    """Set (or replace) the heartbeat: fire count 0, fresh anchor."""
    lim = limits()
    if every and cron:
        raise BadInput("Give either --every or --cron, not both.")
    if tz and not cron:
        raise BadInput("--tz only applies to --cron schedules.")
    text = check_prompt(
        " ".join(prompt),
        lim,
        example="for example: hbgw heartbeat set SESSION --every 10m check CI",
    )
    schedule: Schedule
    if cron:
        schedule, schedule_text = parse_cron(cron, tz=tz), cron + (f" --tz {tz}" if tz else "")
    elif every:
        schedule, schedule_text = (
            IntervalSchedule(parse_interval(every, minimum=lim.min_interval)),
            every,
        )
    else:
        schedule, schedule_text = IntervalSchedule(lim.default_interval), ""
    command = SetHeartbeat(schedule=schedule, prompt=text, schedule_text=schedule_text)
    out(apply_command(open_store(), session_id, command, now()))
    sync_index(session_id)


@app.command()
def pause(session_id: str = SESSION) -> None:
    """Stop firing but keep the heartbeat."""
    out(apply_command(open_store(), session_id, Pause(), now()))
    sync_index(session_id)


@app.command()
def resume(session_id: str = SESSION) -> None:
    """Fire again; the clock re-anchors to now (no instant catch-up)."""
    out(apply_command(open_store(), session_id, Resume(), now()))
    sync_index(session_id)


@app.command()
def clear(session_id: str = SESSION) -> None:
    """Remove the heartbeat (kept as cleared for audit, never restored)."""
    out(apply_command(open_store(), session_id, Clear(), now()))
    sync_index(session_id)
