"""Append-only JSON-lines files shared by several processes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One write per line with O_APPEND, so lines from several worker processes stay whole."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)
