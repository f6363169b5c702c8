"""Who the command agent's child runs as, so that it cannot read the worker's secrets.

The worker holds the database URL, the Redis password and the platforms' tokens. Filtering the
child's environment is not enough: ``/proc/<worker>/environ`` shows the environment block the
worker was started with (whatever ``os.environ`` says since), ``/proc/<worker>/mem`` its
memory, and HBGW_HOME its files (the SQLite file, ``api.json``, the embedded Redis's password,
the logs). A command that follows its prompt read them all (issue 29).

So the child runs as another user, ``HBGW_AGENT_USER`` (``nobody`` by default), with no
supplementary groups: a process of another uid without CAP_SYS_PTRACE reads neither the
worker's ``/proc`` entries nor its 0600 files, and ``close_fds`` leaves it only its three pipes.
Switching needs root (or CAP_SETUID and CAP_SETGID); a worker that cannot switch refuses to
start, unless the operator accepts ``HBGW_AGENT_SAME_USER``: then the worker at least makes
itself non-dumpable, which closes its ``/proc`` environ, mem and fd entries to its own uid, but
not its files.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from hbgw.core.errors import BadInput

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
CAP_SETGID = 6
CAP_SETUID = 7
SAME_USER = "set HBGW_AGENT_SAME_USER=true to run it as the worker's own user instead"
SAME_USER_RISK = (
    "the command agent runs as the worker's own user (HBGW_AGENT_SAME_USER=true): it can read "
    "the worker's files (HBGW_HOME: the database file, api.json, the embedded Redis's password, "
    "the logs) and every secret file the worker reads; set HBGW_AGENT_USER to another user and "
    "run the worker as root to close that"
)


@dataclass(frozen=True)
class AgentUser:
    """The account the child runs as: switched to with ``user=``/``group=`` of subprocess."""

    name: str
    uid: int
    gid: int
    home: str

    @property
    def workdir(self) -> str:
        # Its own home when it has one (nobody's is /nonexistent), never the worker's
        # directory, which may hold the deployment's files.
        return self.home if Path(self.home).is_dir() else "/"


def agent_user(
    name: str, *, same_user: bool, worker_uid: int, can_switch: bool
) -> AgentUser | None:
    """The user to run the command agent as, or None for the worker's own (the operator's
    explicit choice, ``same_user``). Refuses, with what to do, every choice that would let
    the command read the worker's secrets."""
    if same_user:
        root = " AS ROOT: it can read every secret of the machine" if worker_uid == 0 else ""
        log.warning("Insecure:%s %s.", root, SAME_USER_RISK, extra={"action": "agent.same_user"})
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise BadInput(
            f"HBGW_AGENT_USER={name} is not a user on this machine: create it "
            f"(useradd --system --no-create-home {name}) or name another one (nobody)."
        ) from None
    if entry.pw_uid == 0:
        raise BadInput(
            f"HBGW_AGENT_USER={name} is root, which can read every secret of the worker: "
            "name an unprivileged user (nobody)."
        )
    if entry.pw_uid == worker_uid:
        raise BadInput(
            f"HBGW_AGENT_USER={name} is the worker's own user, which can read the worker's "
            f"files and secrets: name another user (nobody), or {SAME_USER}."
        )
    if not can_switch:
        raise BadInput(
            f"The worker runs as uid {worker_uid} and cannot run the command agent as "
            f"HBGW_AGENT_USER={name} (that needs root, or CAP_SETUID and CAP_SETGID): run the "
            f"worker as root (the command still runs as {name}), or {SAME_USER}."
        )
    return AgentUser(name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def check_unreadable_by(user: AgentUser, files: dict[str, Path | None]) -> None:
    """Refuse secret files (by setting name) that ``user`` could read by their owner, group
    or mode: the worker reads them, and the child is meant to read none of its secrets."""
    for setting, path in files.items():
        if path is None:
            continue
        try:
            st = path.stat()
        except OSError:
            continue  # a missing file is its own setting's error, said where it is read
        readable = (
            st.st_mode & 0o004
            or (st.st_gid == user.gid and st.st_mode & 0o040)
            or (st.st_uid == user.uid and st.st_mode & 0o400)
        )
        if readable:
            raise BadInput(
                f"{setting} ({path}, mode {st.st_mode & 0o777:04o}) can be read by "
                f"HBGW_AGENT_USER={user.name}, the command agent's user: make it the worker's "
                "alone (chmod 600, owned by the worker's user; a Kubernetes Secret volume: "
                "defaultMode 0400)."
            )


def can_switch_user(status: Path = Path("/proc/self/status")) -> bool:
    """Whether this process may set its uid and gid: the capabilities it holds, which root
    in a container may have lost."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                caps = int(line.split(":", 1)[1], 16)
                return bool(caps >> CAP_SETUID & 1 and caps >> CAP_SETGID & 1)
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0  # no /proc: root is the only guess that holds


def make_undumpable() -> None:
    """Close this process's /proc environ, mem and fd entries to processes of its own uid
    (and no core dumps). A child's exec makes the child dumpable again, not this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(err)}")
