"""Files and directories only their owner reads: HBGW_HOME holds replies (the SQLite file, the
logs, the file channel) and the embedded Redis's password, so none of it follows the umask.

Directories are made 0700 and files 0600 when this code creates them; a directory that exists
already keeps its mode (it may be shared on purpose), the files made inside it are still 0600.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) made 0700 if it does not exist yet."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return path


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of ``path`` that creates it 0600 (``O_CREAT`` is added)."""
    return os.open(path, flags | os.O_CREAT, FILE_MODE)


def touch_private(path: Path) -> Path:
    """Create ``path`` empty and 0600 unless it exists (a file others then write into, like
    SQLite's database, whose WAL and shared-memory files take its mode)."""
    os.close(open_private(path, os.O_WRONLY))
    return path


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, 0600 from its first byte (written beside, then renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)
