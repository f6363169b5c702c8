"""The shared clock of every process: Redis ``TIME``, sampled by ``core.clock.OffsetClock``.

Every time one process writes and another compares — registry entries, beat replicas, claim
leases, liveness stamps, due times, anchors in SQL — is read here, so a host whose own clock is
wrong still agrees with the others. The offset is the ``hbgw_clock_offset_seconds`` gauge, and a
skew beyond ``HBGW_CLOCK_SKEW_WARN`` is said once in the log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from hbgw.core.clock import OffsetClock, SkewWarning

if TYPE_CHECKING:
    import redis
    from prometheus_client import Gauge

    from hbgw.core.settings import Settings
    from hbgw.state.resp_quick import QuickRedis

log = logging.getLogger("hbgw.clock")


class _Gauge(Protocol):
    def set(self, value: float) -> None: ...


# Seconds between two reads of Redis TIME; in between, the local monotonic clock counts.
SAMPLE_EVERY = 10.0


def redis_seconds(client: redis.Redis | QuickRedis) -> float:
    """Redis ``TIME`` in seconds since the epoch (`hbgw stamp` asks through its quick client)."""
    seconds, micros = client.time()
    return int(seconds) + int(micros) / 1_000_000


def shared_clock(
    client: redis.Redis,
    settings: Settings,
    *,
    gauge: Gauge | _Gauge | None = None,
) -> OffsetClock:
    """This process's clock; ``gauge`` (default: the process's ``hbgw_clock_offset_seconds``)
    gets each offset measured."""
    warn = SkewWarning(settings.clock_skew_warn, log)
    if gauge is None:
        from hbgw.core.metrics import gateway_metrics  # a command that only reads needs no metrics

        gauge = gateway_metrics().clock_offset

    def on_offset(offset: float) -> None:
        gauge.set(offset)
        warn(offset)

    return OffsetClock(lambda: redis_seconds(client), every=SAMPLE_EVERY, on_offset=on_offset)
