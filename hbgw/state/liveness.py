"""Liveness stamps: time, phase and worker of every running turn, on every step.

A turn's worker stamps into a Redis hash; another agent's hook stamps through `hbgw stamp`
(``external``: its writer is no gateway worker, so the worker registry says nothing about it).
Whoever reads the stamps judges them with ``judge``: the age of the last stamp, and whether the
worker that wrote it is still registered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hbgw.core.errors import BadInput
from hbgw.state.keys import Keys

if TYPE_CHECKING:
    import redis

IDLE = "idle"
ALIVE, STALE, DEAD = "alive", "stale?", "dead?"
SUSPECT = frozenset({STALE, DEAD})

# Deletes a stamp only if it is still the one judged: a worker that stamped again since is alive.
_CLEAR_IF_UNCHANGED = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True)
class Stamp:
    session: str
    at_ms: int
    phase: str
    worker: str
    external: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"at_ms": self.at_ms, "phase": self.phase, "worker": self.worker}
        if self.external:
            data["external"] = True
        return data

    @classmethod
    def parse(cls, session: str, raw: str | bytes) -> Stamp | None:
        """The stamp in ``raw``, or None when it is not one (a foreign or damaged entry)."""
        try:
            data = json.loads(raw)
            return cls(
                session,
                int(data["at_ms"]),
                str(data["phase"]),
                str(data["worker"]),
                bool(data.get("external", False)),
            )
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True)
class Verdict:
    stamp: Stamp
    verdict: str
    age_s: float
    reason: str

    @property
    def suspect(self) -> bool:
        return self.verdict in SUSPECT

    def to_json(self) -> dict[str, Any]:
        s = self.stamp
        return {
            "session": s.session,
            "verdict": self.verdict,
            "phase": s.phase,
            "age_seconds": round(self.age_s, 1),
            "worker": s.worker,
            "at_ms": s.at_ms,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Thresholds:
    stale_s: float = 300.0
    dead_s: float = 900.0

    def __post_init__(self) -> None:
        if not 0 < self.stale_s < self.dead_s:
            raise BadInput(
                f"The stale threshold ({self.stale_s:g} s) must be positive and shorter than the "
                f"dead one ({self.dead_s:g} s): raise --dead or lower --stale."
            )


def judge(
    stamps: Iterable[Stamp],
    now_ms: int,
    limits: Thresholds,
    live_workers: Iterable[str] | None = None,
) -> list[Verdict]:
    """Verdicts for the running and recently finished turns, oldest stamp first.

    A finished turn (phase ``idle``) is shown as ``idle`` until it is as old as the dead
    threshold, then left out: it is done, not stalled. ``live_workers`` None means no registry
    is known (a stamp directory), so only age counts.
    """
    live = None if live_workers is None else set(live_workers)
    verdicts = []
    for stamp in stamps:
        age_s = max(0.0, (now_ms - stamp.at_ms) / 1000)
        verdict = _one(stamp, age_s, limits, live)
        if verdict is not None:
            verdicts.append(verdict)
    return sorted(verdicts, key=lambda v: (v.stamp.at_ms, v.stamp.session))


def finished_long_ago(stamps: Iterable[Stamp], now_ms: int, limits: Thresholds) -> list[Stamp]:
    """Stamps of turns that ended (``idle``) at least the dead threshold ago: nobody shows them
    any more, so the reconciler removes them and the hash holds only recent sessions."""
    cutoff = now_ms - limits.dead_s * 1000
    return [s for s in stamps if s.phase == IDLE and s.at_ms <= cutoff]


def _one(stamp: Stamp, age_s: float, limits: Thresholds, live: set[str] | None) -> Verdict | None:
    if stamp.phase == IDLE:
        return None if age_s >= limits.dead_s else Verdict(stamp, IDLE, age_s, "turn finished")
    if age_s >= limits.dead_s:
        return Verdict(stamp, DEAD, age_s, f"no stamp for {age_s:.0f} s")
    if live is not None and not stamp.external and stamp.worker not in live:
        return Verdict(stamp, DEAD, age_s, f"worker {stamp.worker} is gone")
    if age_s >= limits.stale_s:
        return Verdict(stamp, STALE, age_s, f"no stamp for {age_s:.0f} s")
    return Verdict(stamp, ALIVE, age_s, "stamping")


def stamp_command(keys: Keys, stamp: Stamp) -> tuple[str, str, str, str]:
    """The HSET that writes ``stamp``: sent by ``Liveness.stamp`` through redis-py, and by
    `hbgw stamp` through its quick client (``resp_quick``)."""
    return ("HSET", keys.liveness(), stamp.session, json.dumps(stamp.to_json()))


class Liveness:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._clear = client.register_script(_CLEAR_IF_UNCHANGED)

    def stamp(
        self,
        session_id: str,
        at_ms: int,
        phase: str,
        worker: str,
        *,
        external: bool = False,
        pipe: redis.client.Pipeline | None = None,
        missing_only: bool = False,
    ) -> None:
        """Stamp the session's phase; ``pipe``: queued there, sent with its other commands.
        ``missing_only``: write it only where the session has no stamp (HSETNX): a stamp Redis
        evicted comes back, a newer one is never overwritten."""
        record = Stamp(session_id, at_ms, phase, worker, external)
        _hset, key, field, value = stamp_command(self.keys, record)
        target = self.client if pipe is None else pipe
        if missing_only:
            target.hsetnx(key, field, value)
        else:
            target.hset(key, field, value)

    def all(self) -> list[Stamp]:
        entries = self.client.hgetall(self.keys.liveness())
        stamps = (Stamp.parse(str(sid), raw) for sid, raw in entries.items())
        return [s for s in stamps if s is not None]

    def clear(self, stamp: Stamp) -> bool:
        """Remove ``stamp`` unless its session stamped again since; True when removed."""
        value = json.dumps(stamp.to_json())
        return bool(self._clear(keys=[self.keys.liveness()], args=[stamp.session, value]))
