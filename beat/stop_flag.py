"""Shutdown as a flag the beat loop honours (``beat/core.py``, ``beat/scheduler.py``)."""

from __future__ import annotations

import contextlib
import os
import select


class StopFlag:
    """Shutdown as a flag the beat loop honours, safe to set from a signal handler.

    Setting it only flips a boolean and writes one byte to a pipe: no lock, no I/O on the
    connections the loop may be reading (closing those under a read once left beat ticking).
    ``wait`` sleeps on the pipe, so a stop requested during the pause ends it at once.
    """

    def __init__(self) -> None:
        self._set = False
        # Made by the first wait: a core driven tick by tick (tests) never needs one.
        self._pipe: tuple[int, int] | None = None

    def set(self) -> None:
        self._set = True
        if self._pipe is not None:
            # Full (a wake-up byte is already there) or closed at exit: either way, fine.
            with contextlib.suppress(OSError):
                os.write(self._pipe[1], b"x")

    def is_set(self) -> bool:
        return self._set

    def wait(self, seconds: float) -> bool:
        """Pause up to ``seconds``; True as soon as the flag is set."""
        if self._pipe is None:
            read, write = os.pipe()
            os.set_blocking(write, False)
            self._pipe = (read, write)
        # Checked after the pipe exists: a stop set before it was made is seen here, one set
        # after it wakes the select.
        if not self._set and seconds > 0:
            select.select([self._pipe[0]], [], [], seconds)
        return self._set

    def close(self) -> None:
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            os.close(pipe[0])
            os.close(pipe[1])
