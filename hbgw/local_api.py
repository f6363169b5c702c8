"""The API that `hbgw up` runs: a child `hbgw api` on loopback, with a token for the local owner.

Unless HBGW_API_TOKENS is set, a fresh token is made for owner ``local`` at every start; it
reaches the child through its environment only. ``HBGW_HOME/api.json`` (mode 0600) tells
`hbgw chat` and scripts where the API is and which token to send; it is removed on stop.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

import httpx

from hbgw.core.errors import HbgwError
from hbgw.core.settings import Settings
from hbgw.procs import DISCORD_SECRETS, SLACK_SECRETS, TELEGRAM_SECRETS, WEBHOOK_SECRETS

API_FILE = "api.json"
LOCAL_OWNER = "local"
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class LocalApi:
    url: str
    owner: str
    token: str
    generated: bool
    """False when the token comes from HBGW_API_TOKENS (then it is not printed)."""
    listener: socket.socket
    """Bound and listening here, inherited by the child: between choosing the port and the
    child's bind nobody else can take it (a second `up` or `hbgw api` on this machine would
    otherwise answer our /healthz and reject our token)."""

    def args(self) -> list[str]:
        """`hbgw api` on the inherited socket."""
        return ["api", "--fd", str(self.listener.fileno())]

    def env(self, settings: Settings) -> dict[str, str]:
        """What the child `hbgw api` needs beyond the stack's environment (secrets included)."""
        port = self.url.rsplit(":", 1)[1]
        env = {"HBGW_API_HOST": LOOPBACK, "HBGW_API_PORT": port}
        configured = settings.api_tokens.get_secret_value() if settings.api_tokens else ""
        env["HBGW_API_TOKENS"] = configured or f"{self.owner}:{self.token}"
        if settings.admin_token is not None:
            env["HBGW_ADMIN_TOKEN"] = settings.admin_token.get_secret_value()
        platforms = (*SLACK_SECRETS, *TELEGRAM_SECRETS, *DISCORD_SECRETS, *WEBHOOK_SECRETS)
        for name in platforms:  # the platform endpoints it serves
            value = getattr(settings, name)
            if value is not None:
                env[f"HBGW_{name.upper()}"] = value.get_secret_value()
        return env


def plan(settings: Settings) -> LocalApi:
    """The listening socket (the configured port, or any free one when it is taken), its URL,
    and the token to use."""
    from hbgw.gateway.api.auth import parse_tokens

    listener = _listen(settings.api_port) or _listen(0)
    assert listener is not None  # port 0 always binds on loopback
    url = f"http://{LOOPBACK}:{listener.getsockname()[1]}"
    configured = settings.api_tokens.get_secret_value() if settings.api_tokens else ""
    if configured.strip():
        owner, token = parse_tokens(configured)[0]
        return LocalApi(url, owner, token, generated=False, listener=listener)
    return LocalApi(url, LOCAL_OWNER, secrets.token_urlsafe(24), generated=True, listener=listener)


def local_owner(settings: Settings) -> str:
    """Who owns what is made on this machine without naming an owner: the owner `hbgw up`'s
    token speaks for (``api.json`` while it runs), else the first of HBGW_API_TOKENS, else
    ``local`` — the owner the next `hbgw up` gives its token to, so `hbgw chat` finds it."""
    try:
        written = json.loads((settings.home / API_FILE).read_text())
    except (OSError, ValueError):
        written = None
    if isinstance(written, dict) and isinstance(written.get("owner"), str) and written["owner"]:
        return str(written["owner"])
    configured = settings.api_tokens.get_secret_value() if settings.api_tokens else ""
    if configured.strip():
        from hbgw.gateway.api.auth import parse_tokens

        return parse_tokens(configured)[0][0]
    return LOCAL_OWNER


def _listen(port: int) -> socket.socket | None:
    """A socket listening on loopback ``port``, or None when that port is taken."""
    sock = socket.socket()
    try:
        sock.bind((LOOPBACK, port))
        sock.listen(2048)  # uvicorn's backlog; connections queue here until the child serves
    except OSError:
        sock.close()
        return None
    sock.set_inheritable(True)
    return sock


def write_file(home: Path, api: LocalApi) -> None:
    """``api.json``, readable by its owner only, replaced atomically."""
    path = home / API_FILE
    tmp = home / f".{API_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"url": api.url, "token": api.token, "owner": api.owner}, out)
        out.write("\n")
    os.replace(tmp, path)


def remove_file(home: Path) -> None:
    (home / API_FILE).unlink(missing_ok=True)


def wait_ready(api: LocalApi, proc: Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Until the child answers /healthz; it dying or never answering is an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise HbgwError(f"The API exited with {proc.returncode} at start; see {log}.")
        try:
            if httpx.get(f"{api.url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise HbgwError(f"The API did not answer on {api.url} within {timeout:.0f} s; see {log}.")
