"""`hbgw chat`: where the API is, which session, then the terminal loop (hbgw/chat/)."""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Callable
from pathlib import Path

import typer

from hbgw.cli.common import out, path_hint, settings
from hbgw.core.errors import BadInput

API_FILE = "api.json"  # written by `hbgw up` while it runs
NO_ADDRESS = (
    "No API to talk to: start `hbgw up` (it writes HBGW_HOME/api.json), "
    "or pass --url and --token (or set HBGW_API_URL and HBGW_API_TOKEN)."
)


def _from_file(home: Path) -> dict[str, str]:
    path = home / API_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path} is not readable JSON ({exc}); restart `hbgw up`.") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path} is not an object; restart `hbgw up`.")
    return {k: str(v) for k, v in data.items() if k in ("url", "token") and v}


def api_address(url: str | None, token: str | None) -> tuple[str, str, bool]:
    """The API's URL and token: flags, else HBGW_API_URL/HBGW_API_TOKEN, else `hbgw up`'s file;
    and whether both came from the file (then a restarted `hbgw up` is found again there)."""
    url = url or os.environ.get("HBGW_API_URL") or None
    token = token or os.environ.get("HBGW_API_TOKEN") or None
    from_file = url is None and token is None
    if url is None or token is None:
        written = _from_file(settings().home)
        foreign = url is not None and not _same_api(url, written.get("url"))
        if token is None and foreign and written.get("token"):
            # api.json's token belongs to its own API: never sent to another address.
            raise BadInput(
                f"--url {url} needs its own token: pass --token (or set HBGW_API_TOKEN); the "
                "token `hbgw up` wrote is only for its own API"
                + (f" at {written['url']}." if written.get("url") else ".")
            )
        url = url or written.get("url")
        token = token or written.get("token")
    if not url or not token:
        raise BadInput(NO_ADDRESS)
    return url, token, from_file


def _same_api(url: str, written: str | None) -> bool:
    return written is not None and url.rstrip("/") == written.rstrip("/")


def _rediscover(home: Path) -> Callable[[], tuple[str, str] | None]:
    def read() -> tuple[str, str] | None:
        try:
            written = _from_file(home)
        except BadInput:  # caught mid-write by a starting `hbgw up`: ask again next time
            return None
        if "url" in written and "token" in written:
            return written["url"], written["token"]
        return None

    return read


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "user"


def chat(
    session_id: str | None = typer.Argument(
        None, metavar="SESSION", help="Session id; omitted, a new session is created."
    ),
    url: str | None = typer.Option(
        None, "--url", metavar="URL", help="The API's base URL (default: HBGW_API_URL, `hbgw up`)."
    ),
    token: str | None = typer.Option(
        None, "--token", metavar="TOKEN", help="Bearer token (default: HBGW_API_TOKEN, `hbgw up`)."
    ),
) -> None:
    """Talk to a session in the terminal through the HTTP API; Ctrl-D leaves.

    Shows recent history, then replies and heartbeat turns (marked ♥) as they are delivered.
    Slash commands such as /heartbeat every 10m check CI are answered at once.
    """
    from hbgw.chat.client import ApiClient
    from hbgw.chat.terminal import run_chat

    address, bearer, from_file = api_address(url, token)
    rediscover = _rediscover(settings().home) if from_file else None
    with ApiClient(address, bearer, rediscover=rediscover) as client:
        if session_id is None:
            session_id = str(client.create_session("api", f"terminal-{_user()}")["id"])
            out(f"New session {session_id} — come back to it with: hbgw chat {session_id}")
            hint = path_hint()
            if hint:
                out(hint)
        code = run_chat(client, session_id)
    raise typer.Exit(code)


def watch(
    session_id: str = typer.Argument(..., metavar="SESSION", help="Session id."),
    last: int = typer.Option(
        5, "--last", min=0, metavar="N", help="Messages of history shown first (0: none)."
    ),
    url: str | None = typer.Option(
        None, "--url", metavar="URL", help="The API's base URL (default: HBGW_API_URL, `hbgw up`)."
    ),
    token: str | None = typer.Option(
        None, "--token", metavar="TOKEN", help="Bearer token (default: HBGW_API_TOKEN, `hbgw up`)."
    ),
) -> None:
    """Follow a session's deliveries through the HTTP API: replies (agent>), heartbeat turns
    (agent ♥>) and notices, as they are delivered; Ctrl-C stops.

    What a CLI session delivers goes to the console channel (a worker's log); this shows it.
    """
    from hbgw.chat.client import ApiClient
    from hbgw.chat.watch import run_watch

    address, bearer, from_file = api_address(url, token)
    rediscover = _rediscover(settings().home) if from_file else None
    with ApiClient(address, bearer, rediscover=rediscover) as client:
        code = run_watch(client, session_id, last=last)
    raise typer.Exit(code)
