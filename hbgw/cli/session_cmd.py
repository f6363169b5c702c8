"""`hbgw session …`: create, show and move sessions through their lifecycle."""

from __future__ import annotations

import typer

from hbgw.cli.common import err, now, open_store, out, out_json, settings
from hbgw.cli.gateway_ctx import sync_index
from hbgw.cli.help import Command, Group
from hbgw.core.clock import iso

app = typer.Typer(
    cls=Group, help="Create and inspect sessions; compress, reset, switch, suspend, resume."
)


SESSION = typer.Argument(..., metavar="SESSION", help="Session id.")


@app.command(cls=Command)
def create(
    platform: str = typer.Option(..., "--platform", help="slack, telegram, webhook, cli, …"),
    chat: str = typer.Option(..., "--chat", help="Chat (channel) id on the platform."),
    thread: str | None = typer.Option(None, "--thread", help="Thread or topic id."),
    owner: str | None = typer.Option(
        None,
        "--owner",
        help="The user who owns the session (default: the owner of `hbgw up`'s API token, "
        "`local`, so `hbgw chat` and the API find it).",
    ),
) -> None:
    """Create a session; prints its id alone on a line (its owner on stderr)."""
    from hbgw.local_api import local_owner

    chosen = owner if owner is not None else local_owner(settings())
    session = open_store().sessions.create_session(
        platform=platform, chat=chat, thread=thread, owner=chosen, now=now()
    )
    out(session.id)
    if owner is None:
        err(f"Owner: {chosen} (the owner of `hbgw up`'s API token; --owner names another).")


@app.command(cls=Command)
def show(
    session_id: str = SESSION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a session and its heartbeat."""
    store = open_store()
    session = store.sessions.get_session(session_id)
    status = store.heartbeats.heartbeat_status(session_id, now()).to_json()
    if as_json:
        out_json({**session.to_json(), "heartbeat": status})
        return
    where = session.chat + (f" / {session.thread}" if session.thread else "")
    out(f"session   {session.id}")
    out(
        f"status    {session.status}"
        + (f" ({session.closed_reason})" if session.closed_reason else "")
    )
    out(f"where     {session.platform}: {where}")
    out(f"owner     {session.owner or '(none: only the admin token sees it)'}")
    if session.parent_id:
        out(f"parent    {session.parent_id}")
    out(f"created   {iso(session.created_at)}")
    out(
        f"heartbeat {status['status']}"
        + (f" — {status['schedule']}: {status['prompt']}" if status["prompt"] else "")
    )


@app.command(cls=Command)
def compress(session_id: str = SESSION) -> None:
    """Continue the session under a new id (its heartbeat moves along); prints the child id."""
    child = open_store().sessions.compress(session_id, now())
    sync_index(session_id)
    sync_index(child.id)
    out(child.id)


@app.command(cls=Command)
def reset(session_id: str = SESSION) -> None:
    """Start the conversation over; its heartbeat is cleared for good."""
    open_store().sessions.reset(session_id, now())
    sync_index(session_id)
    out(f"Session {session_id} was reset; its heartbeat, if any, is cleared.")


@app.command(cls=Command)
def switch(session_id: str = SESSION) -> None:
    """Move the chat to a new conversation; prints the new session id."""
    new = open_store().sessions.switch(session_id, now())
    sync_index(session_id)
    out(new.id)


@app.command(cls=Command)
def suspend(session_id: str = SESSION) -> None:
    """Suspend the session; its heartbeat is cleared and not restored on resume."""
    open_store().sessions.suspend(session_id, now())
    sync_index(session_id)
    out(f"Session {session_id} is suspended; its heartbeat, if any, is cleared.")


@app.command(cls=Command)
def resume(session_id: str = SESSION) -> None:
    """Reopen a suspended session (without its old heartbeat)."""
    open_store().sessions.resume_session(session_id, now())
    out(f"Session {session_id} is active again.")
