"""Keeps a session lock alive while a turn runs, and notices when it is lost.

Before anything leaves for a platform the turn asks two questions: ``confirm`` (Redis, now:
is the lock still ours?) and, just before the send, ``cleared`` (in memory, cannot block: is
that answer still young?). A confirmation is good for ``lease / CONFIRM_FRACTION`` on the
monotonic clock, counted from the moment the question was *sent*: Redis extended the lease at
some moment after that, so the lock is ours for at least a lease from then, and no other grant
can exist before the lease has run out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

import redis

from core.errors import TurnAborted
from state.turn_gate import TurnGate

__all__ = ["CONFIRM_FRACTION", "Grant", "Lease", "LockKeeper", "TurnAborted"]

# A confirmation of the lock is good for this fraction of the lease: the rest is the margin for
# a slow send and for clocks (ours monotonic, Redis' own) that do not run exactly alike.
CONFIRM_FRACTION = 3


@dataclass(frozen=True)
class Grant:
    """A lock just granted by the turn gate: its holder token and fence."""

    session_id: str
    token: str
    fence: int


class LockKeeper:
    def __init__(
        self,
        gate: TurnGate,
        session_id: str,
        token: str,
        lease_ms: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
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
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hbgw-lock", daemon=True)

    def __enter__(self) -> LockKeeper:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def check(self) -> None:
        if self.lost.is_set():
            raise TurnAborted(f"Lost the lock of session {self.session_id}; the turn stops here.")

    def confirm(self) -> None:
        """Before a delivery: Redis says now that the lock is still ours (and extends it).

        A Redis that cannot answer (down, hung, timed out) has confirmed nothing: the turn stops
        and sends nothing; the next grant answers instead.
        """
        self.check()
        try:
            held = self._renew()
        except redis.RedisError as exc:
            raise TurnAborted(
                f"Could not confirm the lock of session {self.session_id} ({exc}); nothing is sent."
            ) from exc
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

    def _renew(self) -> bool:
        asked = self.monotonic()
        held = self.gate.renew(self.session_id, self.token, self.lease_ms)
        if not held:
            self.lost.set()
            return False
        with self._guard:
            if self._confirmed_at is None or asked > self._confirmed_at:
                self._confirmed_at = asked
        return True

    def _run(self) -> None:
        # Renew at a third of the lease so two missed renewals still leave time.
        every = max(self.lease_ms / 3000, 0.05)
        while not self._stop.wait(every):
            try:
                if not self._renew():
                    return
            except redis.RedisError:
                continue


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
