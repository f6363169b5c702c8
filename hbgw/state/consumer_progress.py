"""What a worker's Celery consumer last reported, so its registry entry tells the truth.

The registry entry is refreshed from its own thread (``state.ownership.RegistryHeartbeat``).
Refreshed regardless, a worker whose consumer cannot consume (issue 15: it reconnected and
failed again for minutes) stayed live, and beat kept routing its sessions' fires to a queue
nobody read. The consumer reports here — connected, each pass of its event loop, the
connection lost — and the registry thread refreshes only while ``consuming`` holds; the entry
then expires after the worker TTL and the worker's sessions hash to live workers.

Times are ``time.monotonic()`` seconds, passed in by the caller.
"""

from __future__ import annotations

import threading
import time

# A worker counts as consuming this long after its start while its consumer connects the first
# time (Celery's start-up); fires routed to it meanwhile wait in its queue.
STARTUP_GRACE = 30.0


class ConsumerProgress:
    """Thread-safe: the consumer writes from its thread, the registry thread reads."""

    def __init__(self, born: float | None = None) -> None:
        self._lock = threading.Lock()
        self._born = time.monotonic() if born is None else born
        self._ever_connected = False
        self._connected = False
        self._ticks = False
        self._last_pass = 0.0

    def connected(self, now: float, *, ticks: bool) -> None:
        """The consumer is connected; ``ticks``: its event loop will report each pass."""
        with self._lock:
            self._connected, self._ticks, self._last_pass = True, ticks, now
            self._ever_connected = True

    def passed(self, now: float) -> None:
        """One pass of the consumer's event loop: it is reading its queue."""
        with self._lock:
            self._last_pass = now

    def lost(self) -> None:
        with self._lock:
            self._connected = False

    def consuming(self, now: float, within: float) -> bool:
        """Connected, and (when its loop reports passes) one within ``within`` seconds: a
        loop that hangs stops the refreshes too."""
        with self._lock:
            if not self._ever_connected:
                return now - self._born <= STARTUP_GRACE
            if not self._connected:
                return False
            return not self._ticks or now - self._last_pass <= within
