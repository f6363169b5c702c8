"""The one clock. Domain code takes ``now`` as an argument; processes read it here."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

Clock = Callable[[], datetime]

log = logging.getLogger("hbgw.clock")


def utcnow() -> datetime:
    return datetime.now(UTC)


def pause(seconds: float) -> None:
    """Wait ``seconds`` without ``time.sleep``: on an event, which a signal handler still
    interrupts. Under a skewed wall clock (libfaketime, as the clock tests and the chaos harness
    run a role) ``time.sleep`` fails with EINVAL; a wait on a monotonic deadline does not."""
    threading.Event().wait(max(seconds, 0.0))


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z``, or None."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


ReferenceTime = Callable[[], float]  # seconds since the epoch on the shared clock (Redis TIME)
OffsetReport = Callable[[float], None]  # called with each new offset, seconds


# Reads of the shared clock per sample at most; the one with the shortest round trip is kept.
READS = 3
# A round trip this short is as good as it gets: no further read in that sample.
GOOD_TRIP = 0.005
# How fast a kept reading's error bound grows, seconds per second: two hosts' monotonic clocks
# drift apart by parts per million; this is a hundred times that.
DRIFT = 1e-4


@dataclass(frozen=True)
class _Reading:
    trip: float  # monotonic seconds from the request to the answer
    mono: float  # monotonic midpoint of the trip
    wall: float  # local wall-clock midpoint of the trip
    shared: float  # the shared clock's answer


class OffsetClock:
    """The shared clock, read cheaply: ``reference()`` sampled now and then, served in between.

    Times that different processes write and compare (leases, registries, liveness stamps, due
    times, anchors in SQL) must come from one clock, or a process whose own clock is 20 s ahead
    sees every other entry as expired and dates its own in the future. ``reference`` reads that
    one clock (``TIME`` of the shared Redis, ``hbgw/state/shared_clock.py``). A sample is corrected
    for the round trip: the reference time is taken as the midpoint of the request. Between
    samples, the time served is the last sample plus the local *monotonic* time elapsed since,
    and a sample takes up to ``READS`` reads and keeps the one with the shortest trip; a looser
    sample replaces the base only once the base's error bound (half its trip, grown by ``DRIFT``
    a second) has become larger, so a busy host does not trade a good reading for a bad one.
    A jump of the local wall clock changes nothing until the next sample re-measures it.
    A sample that fails keeps the last one (before any has succeeded: the local wall clock),
    and is tried again one ``every`` later, not at every read.
    """

    def __init__(
        self,
        reference: ReferenceTime,
        *,
        every: float = 10.0,
        on_offset: OffsetReport | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if every <= 0:
            raise ValueError(f"every must be > 0 seconds, got {every}")
        self._reference = reference
        self._every = every
        self._on_offset = on_offset
        self._wall = wall
        self._monotonic = monotonic
        self._sampling = threading.Lock()
        # (monotonic, shared seconds) at the last good sample; None: serve the wall clock.
        self._base: tuple[float, float] | None = None
        self._next_sample = float("-inf")  # monotonic time of the next attempt
        self._error = 0.0  # seconds: the base's error bound when it was read
        self._error_at = 0.0  # monotonic time of that reading
        self.offset: float | None = None  # shared - local wall clock, seconds, at the last sample

    def __call__(self) -> datetime:
        return datetime.fromtimestamp(self.seconds(), UTC)

    def seconds(self) -> float:
        # One thread samples; the others serve the last sample meanwhile, never wait on Redis.
        if self._monotonic() >= self._next_sample and self._sampling.acquire(blocking=False):
            try:
                if self._monotonic() >= self._next_sample:  # not just done by another thread
                    self._sample()
            finally:
                self._sampling.release()
        base = self._base
        if base is None:
            return self._wall()
        return base[1] + (self._monotonic() - base[0])

    def _sample(self) -> None:
        best: _Reading | None = None
        for _ in range(READS):
            try:
                reading = self._read()
            except Exception as exc:
                if best is None:
                    self._next_sample = self._monotonic() + self._every
                    log.warning(
                        "clock: cannot read the shared clock (%s); keeping the last offset (%s s)",
                        exc,
                        "none yet" if self.offset is None else f"{self.offset:+.3f}",
                        extra={"action": "clock.sample_failed"},
                    )
                    return
                break
            if best is None or reading.trip < best.trip:
                best = reading
            if best.trip <= GOOD_TRIP:
                break
        assert best is not None
        self._next_sample = self._monotonic() + self._every
        # Half the round trip bounds a reading's error. A busy host stretches some trips (the
        # reader descheduled between send and answer, asymmetrically): such a reading does not
        # replace an earlier, tighter one until that one has aged past it.
        error = best.trip / 2
        if self._base is None or error <= self._error_now():
            self._base, self._error, self._error_at = (best.mono, best.shared), error, best.mono
        # The local wall clock's offset, from this reading: what the skew warning needs.
        self.offset = best.shared - best.wall
        if self._on_offset is not None:
            self._on_offset(self.offset)

    def _read(self) -> _Reading:
        wall_sent, mono_sent = self._wall(), self._monotonic()
        shared = self._reference()
        wall_received, mono_received = self._wall(), self._monotonic()
        return _Reading(
            trip=mono_received - mono_sent,
            mono=(mono_sent + mono_received) / 2,
            wall=(wall_sent + wall_received) / 2,
            shared=shared,
        )

    def _error_now(self) -> float:
        """The kept base's error bound now: its reading's, grown by the drift since."""
        return self._error + DRIFT * max(0.0, self._monotonic() - self._error_at)


class SkewWarning:
    """Says once, when the local clock differs from the shared one by more than ``bound``
    seconds, and once more when it is back within it: a skewed host is an operator's to fix."""

    def __init__(self, bound: float, logger: logging.Logger | None = None) -> None:
        self.bound = bound
        self.log = logger or log
        self.warned = False

    def __call__(self, offset: float) -> None:
        if abs(offset) > self.bound and not self.warned:
            self.warned = True
            self.log.warning(
                "clock: this host's clock is %+.3f s off the shared clock (Redis TIME), more "
                "than HBGW_CLOCK_SKEW_WARN (%g s); the gateway uses the shared clock, but fix "
                "the host's time sync (NTP)",
                -offset,
                self.bound,
                extra={"action": "clock.skew", "offset_seconds": round(offset, 3)},
            )
        elif abs(offset) <= self.bound and self.warned:
            self.warned = False
            self.log.info(
                "clock: this host's clock is back within %g s of the shared clock (%+.3f s)",
                self.bound,
                -offset,
                extra={"action": "clock.skew_ended", "offset_seconds": round(offset, 3)},
            )
