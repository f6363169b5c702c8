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

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

import redis

from hbgw.core.errors import TurnAborted
from hbgw.state.turn_gate import TurnGate

__all__ = ["CONFIRM_FRACTION", "Grant", "Lease", "LockKeeper", "LockRenewals", "TurnAborted"]

# A confirmation of the lock is good for this fraction of the lease: the rest is the margin for
# a slow send and for clocks (ours monotonic, Redis' own) that do not run exactly alike.
CONFIRM_FRACTION = 3


@dataclass(frozen=True)
class Grant:
    """A lock just granted by the turn gate: its holder token and fence."""

    session_id: str
    token: str
    fence: int


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
        asked = self.monotonic()
        held = self.gate.renew_many([(k.session_id, k.token, k.lease_ms) for k in keepers])
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

    @property
    def session_id(self) -> str:
        return self.grant.session_id

    @property
    def fence(self) -> int:
        return self.grant.fence
