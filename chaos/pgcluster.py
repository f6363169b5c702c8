"""A private PostgreSQL cluster for one chaos run: ``initdb`` on a free port, so the run may
stop and start its database server (``pg_restart``) without touching the shared one on 5432.

``initdb`` refuses to run as root; as root the cluster belongs to ``nobody`` (``runuser``), its
directory is a fresh one under the temporary directory (world-traversable, unlike the run's
home) and its socket lives in it. It answers on 127.0.0.1 only, trusts local connections, and
runs without fsync (a test server: speed over durability). ``stop()`` stops it and removes it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hbgw.core.errors import HbgwError

HOST = "127.0.0.1"
SEARCH = ("/usr/lib/postgresql/*/bin",)
TIMEOUT = 60.0  # initdb and a start on a busy two-core machine


def find_bin() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    for pattern in SEARCH:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if (Path(candidate) / "initdb").exists():
                return Path(candidate)
    return None


def _runuser() -> str:
    """``runuser`` lives in sbin, which a scrubbed PATH may leave out."""
    found = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise HbgwError("The chaos PostgreSQL needs `runuser` (util-linux) to run initdb as root.")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PrivatePostgres:
    bindir: Path
    port: int = 0
    data: Path | None = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@{HOST}:{self.port}/postgres"

    def _as_owner(self, *args: str) -> list[str]:
        return [_runuser(), "-u", "nobody", "--", *args] if os.geteuid() == 0 else list(args)

    def _run(self, *args: str, timeout: float = TIMEOUT) -> None:
        done = subprocess.run(
            self._as_owner(*args), capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise HbgwError(
                f"`{' '.join(args[:2])}` failed for the chaos PostgreSQL: {done.stderr.strip()}"
            )

    def start(self) -> str:
        data = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        self.data = data
        if os.geteuid() == 0:
            shutil.chown(data, "nobody")
        self._run(
            str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip
        self.port = _free_port()
        self._pg_ctl("start")
        return self.url

    def _pg_ctl(self, action: str, *extra: str) -> None:
        assert self.data is not None
        options = f"-p {self.port} -k {self.data} -c listen_addresses={HOST} -c fsync=off"
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.data / "server.log"), "-w", "-t", str(int(TIMEOUT)), action, *extra,
        )  # fmt: skip

    def postmaster_pid(self) -> int:
        assert self.data is not None
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def down(self) -> None:
        """``pg_ctl stop -m fast``: the server goes away and every connection is dropped."""
        self._pg_ctl("stop", "-m", "fast")

    def up(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        if self.data is None:
            return
        # Not running is fine: it failed to start, or was already stopped.
        with contextlib.suppress(HbgwError, OSError, subprocess.TimeoutExpired):
            self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.data, ignore_errors=True)
        self.data = None
