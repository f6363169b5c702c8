"""Child processes that never outlive their parent."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pydantic import SecretStr

from hbgw.core.private import open_private
from hbgw.core.settings import Settings

PR_SET_PDEATHSIG = 1


# The secrets each role of a deployment needs, and only those: a child gets every other
# setting, but a secret only where it is used (the API's tokens: ``LocalApi.env``).
SLACK_SECRETS = ("slack_signing_secret", "slack_bot_token")  # set together, or neither
TELEGRAM_SECRETS = ("telegram_bot_token", "telegram_secret_token")  # together, or neither
DISCORD_SECRETS = ("discord_bot_token",)  # its public key and application id are not secret
WEBHOOK_SECRETS = ("webhook_secret",)  # verifies inbound webhooks (API), signs outbound (worker)
PLATFORM_SECRETS = (*SLACK_SECRETS, *TELEGRAM_SECRETS, *DISCORD_SECRETS, *WEBHOOK_SECRETS)
ROLE_SECRETS: dict[str, tuple[str, ...]] = {
    # The OpenAI-compatible agent's bearer token; each platform's, to post the replies.
    "worker": ("openai_api_key", *PLATFORM_SECRETS),
    "beat": ("alert_webhook", "alert_webhook_secret"),  # stall alerts and their signature
}


def settings_env(settings: Settings, **overrides: str) -> dict[str, str]:
    """This process's environment with ``settings`` spelled out as HBGW_* for a child (its
    secrets left out: ``secrets_env`` adds those a role needs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBGW_")}
    for name, value in settings.model_dump().items():
        if value is not None and not isinstance(value, SecretStr):
            env[f"HBGW_{name.upper()}"] = str(value)
    env["HBGW_DATABASE_URL"] = settings.effective_database_url
    env.update({f"HBGW_{k.upper()}": v for k, v in overrides.items()})
    return env


def secrets_env(settings: Settings, role: str) -> dict[str, str]:
    """The HBGW_* secrets a child of ``role`` (``worker``, ``beat``) needs, as configured."""
    env = {}
    for name in ROLE_SECRETS.get(role, ()):
        value = getattr(settings, name)
        if isinstance(value, SecretStr) and value.get_secret_value():
            env[f"HBGW_{name.upper()}"] = value.get_secret_value()
    return env


def _die_with_parent() -> None:
    # Linux: the kernel sends SIGTERM to the child if the parent dies, even by SIGKILL.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def spawn_hbgw(
    args: list[str],
    *,
    env: dict[str, str],
    log: Path | None = None,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start `hbgw ARGS` with this interpreter; output goes to ``log`` when given."""
    return spawn_module("hbgw", args, env=env, log=log, pass_fds=pass_fds)


def spawn_module(
    module: str,
    args: list[str],
    *,
    env: dict[str, str],
    log: Path | None = None,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start `python -m MODULE ARGS` with this interpreter, dying with its parent; the
    descriptors of ``pass_fds`` stay open in the child under the same numbers."""
    # 0600: a worker's log holds replies. The child owns the file from here.
    out = os.fdopen(open_private(log, os.O_WRONLY | os.O_APPEND), "ab") if log else None
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=env,
            stdout=out or None,
            stderr=subprocess.STDOUT if out else None,
            preexec_fn=_die_with_parent if os.name == "posix" else None,
            pass_fds=pass_fds,
        )
    finally:
        if out:
            out.close()


def stop_all(procs: list[subprocess.Popen[bytes]], timeout: float = 15.0) -> None:
    """SIGTERM every child we started, then SIGKILL whatever is left after ``timeout``."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        remaining = max(0.1, deadline - time.monotonic())
        try:
            proc.wait(remaining)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
