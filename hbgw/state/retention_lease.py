"""The retention lease: which beat replica runs the next retention step, and when.

One key, ``ns:{retention}:lease``, set with NX and a PX of the retention interval: the replica
that sets it runs a step, and no replica runs another until it lapses, so the lease is both the
mutual exclusion and the schedule. A step that left work shortens its own lease, so the next
tick of any replica goes on. Losing the key (a Redis restart) only makes the next step sooner.
"""

from __future__ import annotations

import redis

from hbgw.state.keys import Keys

# A step that left rows behind lets the next one start this soon (one beat tick or two).
CONTINUE_MS = 1000


class RetentionLease:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.key = keys.retention_lease()

    def acquire(self, token: str, interval_ms: int) -> bool:
        """True when this replica runs the step due now (the lease was free)."""
        return bool(self.client.set(self.key, token, nx=True, px=interval_ms))

    def shorten(self, token: str) -> None:
        """The step left work: free the lease soon, if it is still this replica's."""
        held = self.client.get(self.key)
        if held is not None and _text(held) == token:
            self.client.pexpire(self.key, CONTINUE_MS)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
