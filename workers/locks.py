"""Keeps a session lock alive while a turn runs, and notices when it is lost.

Before anything leaves for a platform the turn asks two questions: ``confirm`` (Redis, now:
is the lock still ours?) and, just before the send, ``cleared`` (in memory, cannot block: is
that answer still young?). A confirmation is good for ``lease / CONFIRM_FRACTION`` on the
monotonic clock, counted from the moment the question was *sent*: Redis extended the lease at
some moment after that, so the lock is ours for at least a lease from then, and no other grant
can exist before the lease has run out.

Renewals are shared: one ``LockRenewals`` thread per turn runner renews every lock the process
holds in one pipelined round trip per period. A thread per lock doubled the threads of a worker
and its Redis round trips; with slow model calls a worker holds hundreds of turns at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import TracebackType

import redis

from hbgw.core.errors import TurnAborted
from hbgw.state.turn_gate import Queue, Step, TurnGate

__all__ = [
    "CONFIRM_FRACTION",
    "Grant",
    "Lease",
    "LockKeeper",
    "LockRenewals",
    "Recheck",
    "TurnAborted",
]

# A confirmation of the lock is good for this fraction of the lease: the rest is the margin for
# a slow send and for clocks (ours monotonic, Redis' own) that do not run exactly alike.
CONFIRM_FRACTION = 3


@dataclass(frozen=True)
class Recheck:
    """What a fire's grant read in its round trip, after the lock was taken: the emergency stop
    (global or the session's) and the session's owner among the live workers."""

    estop: bool
    owner: str | None


@dataclass(frozen=True)
class Grant:
    """A lock just granted by the turn gate: its holder token and fence."""

    session_id: str
    token: str
    fence: int
    first: Step | None = None  # a drain's first step, taken with the lock
    seen: Recheck | None = None  # a fire's re-check (a heartbeat's, a job's), read with the lock


class LockRenewals:
    """Renews the locks of every registered keeper, all in one pipelined call a period.

    The thread starts with the first keeper and runs until ``close``; between turns it wakes
    once a period and does nothing.
    """

    def __init__(
        self, gate: TurnGate, lease_ms: int, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.gate = gate
        # Renew at a third of the lease so two missed renewals still leave time.
        self.period = max(lease_ms / 3000, 0.05)
        self.monotonic = monotonic
        self._keepers: dict[int, LockKeeper] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, keeper: LockKeeper) -> None:
        with self._guard:
            if self._stop.is_set():
                raise RuntimeError("The lock renewals are closed: the worker is stopping.")
            self._keepers[id(keeper)] = keeper
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hbgw-locks", daemon=True)
                self._thread.start()

    def remove(self, keeper: LockKeeper) -> None:
        with self._guard:
            self._keepers.pop(id(keeper), None)

    def held(self) -> int:
        with self._guard:
            return len(self._keepers)

    def close(self, timeout: float = 5.0) -> None:
        with self._guard:
            self._stop.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def renew_all(self) -> None:
        """One pipelined renewal of every registered lock; a lock found gone is marked lost."""
        with self._guard:
            keepers = list(self._keepers.values())
        if not keepers:
            return
        with ExitStack() as sending:
            # Stamps a turn held since its last round trip go out with the renewal; each
            # keeper's guard stays taken until Redis answered, so a newer stamp the turn sends
            # next cannot arrive first.
            stamps = [s for k in keepers if (s := sending.enter_context(k.held_stamp()))]
            asked = self.monotonic()
            held = self.gate.renew_many(
                [(k.session_id, k.token, k.lease_ms) for k in keepers],
                first=(lambda pipe: [stamp(pipe) for stamp in stamps]) if stamps else None,
            )
        for keeper, still in zip(keepers, held, strict=True):
            keeper.renewed(asked, still)
            if not still:
                self.remove(keeper)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.renew_all()
            except redis.RedisError:
                continue  # the next period tries again; ``cleared`` stops a send meanwhile


class LockKeeper:
    """One turn's lock: registered with the runner's ``LockRenewals`` while the turn runs
    (a renewal of its own when none is given, as in tests)."""

    def __init__(
        self,
        gate: TurnGate,
        session_id: str,
        token: str,
        lease_ms: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        renewals: LockRenewals | None = None,
    ) -> None:
        self.gate = gate
        self.session_id = session_id
        self.token = token
        self.lease_ms = lease_ms
        self.confirm_bound = lease_ms / 1000 / CONFIRM_FRACTION
        self.lost = threading.Event()
        self.monotonic = monotonic
        # When the newest renewal that Redis answered "held" was sent (monotonic seconds).
        self._confirmed_at: float | None = None
        self._guard = threading.Lock()
        self._stamp_guard = threading.Lock()
        self._held: Queue | None = None
        self._restore: Queue | None = None
        self._own = renewals is None
        self._renewals = renewals or LockRenewals(gate, lease_ms, monotonic=monotonic)

    def __enter__(self) -> LockKeeper:
        self._renewals.add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._renewals.remove(self)
        if self._own:
            self._renewals.close()

    def hold(self, stamp: Queue, restore: Queue) -> None:
        """Keep a liveness stamp for the turn's next round trip, or the renewals' if the turn
        makes none before (a long model call): a step of the agent costs no round trip of its
        own, and a stamp is never older than a renewal period when it lands.

        ``restore``: the same stamp written only where Redis has none; every renewal with no
        newer stamp to send sends it, so a stamp an evicting Redis dropped during a long model
        call is back within a renewal period (issue 29), and a newer one is never overwritten.
        """
        with self._stamp_guard:
            self._held, self._restore = stamp, restore

    def take_held(self) -> Queue | None:
        """The held stamp, for the turn's own round trip; waits for a renewal that is sending
        it, so the stamps of one turn land in the order they were made."""
        with self._stamp_guard:
            stamp, self._held = self._held, None
            return stamp

    @contextlib.contextmanager
    def held_stamp(self) -> Iterator[Queue | None]:
        """The held stamp, taken for the renewals' round trip, else the last one's restore
        (``hold``); the guard is held while it is sent."""
        with self._stamp_guard:
            stamp, self._held = self._held, None
            yield stamp if stamp is not None else self._restore

    def check(self) -> None:
        if self.lost.is_set():
            raise TurnAborted(f"Lost the lock of session {self.session_id}; the turn stops here.")

    def confirm(self, first: Callable[[redis.client.Pipeline], object] | None = None) -> None:
        """Before a delivery: Redis says now that the lock is still ours (and extends it).

        A Redis that cannot answer (down, hung, timed out) has confirmed nothing: the turn stops
        and sends nothing; the next grant answers instead. ``first``: best-effort commands sent
        ahead of the confirmation in the same round trip (``TurnGate.renew_after``); the
        confirmation still counts from before that round trip was sent.
        """
        self.check()
        try:
            asked = self.monotonic()
            if first is None:
                held = self.gate.renew(self.session_id, self.token, self.lease_ms)
            else:
                held = self.gate.renew_after(self.session_id, self.token, self.lease_ms, first)
        except redis.RedisError as exc:
            raise TurnAborted(
                f"Could not confirm the lock of session {self.session_id} ({exc}); nothing is sent."
            ) from exc
        self.renewed(asked, held)
        if not held:
            self.check()

    def cleared(self) -> None:
        """Just before the send: the last confirmation is younger than ``confirm_bound``.

        In memory only, so nothing that can block sits between this check and the send.
        """
        self.check()
        confirmed_at = self._confirmed_at
        age = None if confirmed_at is None else self.monotonic() - confirmed_at
        if age is None or age > self.confirm_bound:
            shown = "never" if age is None else f"{age:.2f} s ago"
            raise TurnAborted(
                f"The lock of session {self.session_id} was last confirmed {shown}, longer than "
                f"the {self.confirm_bound:.2f} s a confirmation is good for; nothing is sent."
            )

    def renewed(self, asked: float, held: bool) -> None:
        """Redis answered a renewal sent at ``asked`` (monotonic): ``held`` or lost for good."""
        if not held:
            self.lost.set()
            return
        with self._guard:
            if self._confirmed_at is None or asked > self._confirmed_at:
                self._confirmed_at = asked


@dataclass
class Lease:
    """A held grant while work runs under it (its fence already claimed in SQL)."""

    grant: Grant
    keeper: LockKeeper
    # What a finished turn leaves for Redis (its wake-up, due time, idle stamp): sent ahead of
    # the drain's next step, in its round trip (``SessionLoop``).
    after: list[Queue] = field(default_factory=list)

    def take_after(self) -> Queue | None:
        """The held stamp and the commands left for the next step, as one queue; None if none."""
        queued = [q for q in (self.keeper.take_held(), *self.after) if q is not None]
        self.after.clear()
        if not queued:
            return None
        return lambda pipe: [queue(pipe) for queue in queued]

    @property
    def session_id(self) -> str:
        return self.grant.session_id

    @property
    def fence(self) -> int:
        return self.grant.fence
