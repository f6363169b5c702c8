"""A wrong clock for one process: libfaketime preloaded, monotonic time left alone.

With ``FAKETIME_DONT_FAKE_MONOTONIC=1`` the wall clock is off by the skew while timeouts and
intervals measured on the monotonic clock stay true (see /work/shared/PITFALLS.md: Python's
``time.sleep`` may then fail with EINVAL inside that process; the roles should not depend on it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from chaos.profiles import SKEW

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")


def skew_env(skew: str = SKEW, library: Path = LIBFAKETIME) -> dict[str, str] | None:
    """The environment that skews a child's clock, or None when libfaketime is not here."""
    if not library.exists():
        return None
    return {
        "LD_PRELOAD": str(library),
        "FAKETIME": skew,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def measured_skew(extra: dict[str, str], timeout: float = 30.0) -> float | None:
    """How far ahead a process started with ``extra`` finds the wall clock (seconds)."""
    env = {**os.environ, **extra}
    before = time.time()
    done = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    after = time.time()
    try:
        seen = float(done.stdout.strip())
    except ValueError:
        return None
    return round(seen - (before + after) / 2, 1)
