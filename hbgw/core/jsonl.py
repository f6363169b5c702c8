"""Append-only JSON-lines files shared by several processes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hbgw.core.private import open_private


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One write per line with O_APPEND, so lines from several worker processes stay whole."""
    fd = open_private(path, os.O_WRONLY | os.O_APPEND)  # replies and agent records: 0600
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)
