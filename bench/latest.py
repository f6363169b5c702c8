"""The newest result the runner wrote for a benchmark (file stamps sort as time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def newest(name: str, results: Path = RESULTS) -> dict[str, Any] | None:
    """The whole payload of the newest ``<name>-*.json`` in ``results``, or None."""
    found = sorted(results.glob(f"{name}-*.json"))
    if not found:
        return None
    payload: dict[str, Any] = json.loads(found[-1].read_text())
    return payload
