"""Liveness stamps as files, for a machine without Redis: one ``<session>.json`` per session.

Every write goes to a temporary file in the same directory, is flushed to disk, then renamed
over the old stamp: a reader sees the old stamp or the new one, never half of one. Temporary
files start with a dot and do not end in ``.json``, so a reader never picks one up.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from hbgw.core.errors import BadInput
from hbgw.core.private import private_dir
from hbgw.state.liveness import Stamp

_SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+=-]{0,127}")
_PHASE = re.compile(r"\S.{0,199}", re.DOTALL)


def check_session_name(name: str) -> str:
    if not _SESSION_NAME.fullmatch(name) or name.endswith(".json"):
        raise BadInput(
            f"{name!r} is not a usable session name: use 1–128 letters, digits and . _ - : @ + =, "
            "starting with a letter or digit (no slash: the name becomes a file name)."
        )
    return name


def check_phase(phase: str) -> str:
    if not _PHASE.fullmatch(phase) or any(c in phase for c in "\r\n"):
        raise BadInput(
            f"{phase!r} is not a usable phase: give one line of up to 200 characters, such as "
            "thinking or tool:Bash."
        )
    return phase


class LivenessDir:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, stamp: Stamp) -> Path:
        check_session_name(stamp.session)
        private_dir(self.path)
        target = self.path / f"{stamp.session}.json"
        data = json.dumps({"session": stamp.session, **stamp.to_json()}).encode()
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".stamp.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def all(self) -> list[Stamp]:
        if not self.path.is_dir():
            return []
        stamps = []
        for file in sorted(self.path.glob("*.json")):
            if file.name.startswith("."):
                continue
            try:
                raw = file.read_bytes()
            except FileNotFoundError:
                continue  # removed between the listing and the read
            stamp = Stamp.parse(file.name.removesuffix(".json"), raw)
            if stamp is not None:
                stamps.append(stamp)
        return stamps
