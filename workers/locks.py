"""Keeps a session lock alive while a turn runs, and notices when it is lost."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType

import redis

from core.errors import TurnAborted
from state.turn_gate import TurnGate

__all__ = ["Grant", "Lease", "LockKeeper", "TurnAborted"]


@dataclass(frozen=True)
class Grant:
    """A lock just granted by the turn gate: its holder token and fence."""

    session_id: str
    token: str
    fence: int


class LockKeeper:
    def __init__(self, gate: TurnGate, session_id: str, token: str, lease_ms: int) -> None:
        self.gate = gate
        self.session_id = session_id
        self.token = token
        self.lease_ms = lease_ms
        self.lost = threading.Event()
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
        """Just before a delivery: the lock is still ours, for one more whole lease.

        The renewal thread notices a loss only at its next beat; this asks Redis now. When Redis
        cannot answer, the fenced SQL write that follows is the judge.
        """
        self.check()
        try:
            held = self.gate.renew(self.session_id, self.token, self.lease_ms)
        except redis.RedisError:
            return
        if not held:
            self.lost.set()
            self.check()

    def _run(self) -> None:
        # Renew at a third of the lease so two missed renewals still leave time.
        every = max(self.lease_ms / 3000, 0.05)
        while not self._stop.wait(every):
            try:
                if not self.gate.renew(self.session_id, self.token, self.lease_ms):
                    self.lost.set()
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
