"""Where beat's restore sweep stands, in Redis, shared by every beat replica.

One hash, ``ns:{restore}:sweep``, holds the sweep under way (``phase``, ``cursor``, ``started``,
``steps``) and between sweeps when the next may start (``next``) and how many steps the last
one took (``last``). Its ``epoch`` field is written when a sweep completes: from then on the
index is known complete. It lives in Redis with the index, so whatever makes Redis lose the
index (a flush, a restart without persistence, a failover to an empty replica) takes the epoch
too, and one read per tick tells beat to rebuild at once.

A step runs under a short lease (``SET NX PX``): one replica at a time, whichever asks first,
and none waits for a replica that died mid-step longer than the lease. The step's progress is
recorded only while its lease is still held, in the same script that releases it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis
from redis.client import Pipeline
from redis.commands.core import Script

from hbgw.state.keys import Keys
from hbgw.state.scripts import load_script

__all__ = ["Phase", "RestoreSweep", "SweepState"]


class Phase(StrEnum):
    MESSAGES = "messages"  # queued user messages back into their inboxes (users wait on these)
    HEARTBEATS = "heartbeats"  # the due index, and the fences of sessions Redis lost
    JOBS = "jobs"  # cron jobs' entries in the due index (job:<id>)


@dataclass(frozen=True)
class SweepState:
    epoch_ms: int | None  # when the sweep that last completed began; None: Redis lost it all
    phase: Phase | None  # None between sweeps
    cursor: str  # last key done in the phase; "" at its start
    started_ms: int  # when the sweep under way began
    steps: int  # steps of the sweep under way
    next_ms: int  # earliest start of the next regular sweep
    last_steps: int  # steps the last complete sweep took

    @property
    def lost(self) -> bool:
        """No epoch: Redis lost its data since the last complete sweep (or there never was one)."""
        return self.epoch_ms is None


def _int(fields: Mapping[str, str], name: str) -> int:
    return int(fields.get(name) or 0)


class RestoreSweep:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._commit: Script = load_script(client, "hbgw.state", "lua/restore_commit.lua")

    def read(self) -> SweepState:
        return self.state_of(self.client.hgetall(self.keys.restore_sweep()))

    def queue_read(self, pipe: Pipeline) -> None:
        """``read``'s command on a pipeline the caller runs with more (beat's tick, with its
        registries); its answer through ``state_of``."""
        pipe.hgetall(self.keys.restore_sweep())

    @staticmethod
    def state_of(raw: Mapping[Any, Any]) -> SweepState:
        fields = {_text(k): _text(v) for k, v in raw.items()}
        phase = fields.get("phase")
        return SweepState(
            epoch_ms=int(fields["epoch"]) if "epoch" in fields else None,
            phase=Phase(phase) if phase else None,
            cursor=fields.get("cursor", ""),
            started_ms=_int(fields, "started"),
            steps=_int(fields, "steps"),
            next_ms=_int(fields, "next"),
            last_steps=_int(fields, "last"),
        )

    def acquire(self, token: str, lease_ms: int) -> bool:
        """Take the lease for one step; False while another replica runs one."""
        return bool(self.client.set(self.keys.restore_lease(), token, nx=True, px=lease_ms))

    def commit(self, token: str, fields: Mapping[str, str | int], drop: Sequence[str] = ()) -> bool:
        """Write ``fields``, delete ``drop`` and release the lease; False (nothing written) when
        the lease is no longer ``token``'s."""
        args: list[str | int] = [token, len(drop), *drop]
        for name, value in fields.items():
            args += [name, value]
        keys = [self.keys.restore_lease(), self.keys.restore_sweep()]
        return bool(self._commit(keys=keys, args=args))

    def release(self, token: str) -> bool:
        """Give the lease up without recording anything (a step that failed)."""
        return self.commit(token, {})


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
