"""Fires a beat holds back for a worker whose queue still has a message waiting.

Each message costs a worker's consumer the same few Redis round trips, one after another in
its single loop thread, whatever it carries; a consumer that is behind (a far Redis, a busy
machine) would fall further behind with every small message beat adds. So while a worker's
queue still holds a message its consumer has not taken, the fires beat claims for it wait
here, and go out together in one message as soon as the queue is empty, or once the oldest has
waited ``HBGW_BEAT_HOLD`` (a consumer that takes nothing never keeps them for long). They would
have waited behind that message anyway.

Held claims stay leased in the due index: a beat that dies holding them loses only its memory,
and the index hands them out again after the claim lease, like a message lost in transit.
"""

from __future__ import annotations

from hbgw.state.due_index import Claim


class HeldFires:
    def __init__(self, hold_ms: int) -> None:
        self.hold_ms = hold_ms
        # Claim -> when this beat first held it (ms), in the order held.
        self._since: dict[Claim, int] = {}

    def __len__(self) -> int:
        return len(self._since)

    def take(self) -> list[Claim]:
        """Every held claim, for this tick to group again with what it claimed (their owner
        may have changed); what is held again keeps the time it was first held."""
        return list(self._since)

    def settle(self, owner_fires: list[Claim], *, waiting: bool, now_ms: int) -> bool:
        """True: send ``owner_fires`` now (they leave this hold); False: keep holding them."""
        if not waiting or self.hold_ms <= 0:
            self.release(owner_fires)
            return True
        oldest = min((self._since.get(claim, now_ms) for claim in owner_fires), default=now_ms)
        if now_ms - oldest >= self.hold_ms:
            self.release(owner_fires)
            return True
        for claim in owner_fires:
            self._since.setdefault(claim, now_ms)
        return False

    def release(self, claims: list[Claim]) -> None:
        for claim in claims:
            self._since.pop(claim, None)
