"""Faults on a schedule: each begins, lasts its duration, ends, and is recorded with both times.

A fault's end is when the harness removed the condition (a killed role restarted, Redis back,
memory raised, a paused worker resumed); how long the system then needs is measured afterwards
from the ledger (chaos/recovery.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from chaos.cluster import Cluster, PinnedRedis
from chaos.database import Database
from chaos.profiles import FaultPlan

log = logging.getLogger("chaos.faults")
HEADROOM = 16 * 1024  # bytes above used_memory: the next few writes hit the limit
TURN_WAIT = 3.0  # longest wait for the worker to be inside a turn before it is paused


@dataclass
class FaultRecord:
    kind: str
    target: str | None
    began: float
    ended: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "began": round(self.began, 3),
            "ended": None if self.ended is None else round(self.ended, 3),
            "lasted_s": None if self.ended is None else round(self.ended - self.began, 2),
            **self.detail,
        }


@dataclass
class Faults:
    cluster: Cluster
    redis_server: PinnedRedis
    admin_redis: redis.Redis
    database: Database
    plans: list[FaultPlan]
    records: list[FaultRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    _active: dict[int, FaultRecord] = field(default_factory=dict)
    _port: int = 0

    def __post_init__(self) -> None:
        self._port = self.redis_server.port
        if self.database.kind != "postgresql":
            self.skipped.append("pg_terminate")

    def step(self, elapsed: float) -> None:
        """Begin what is due, end what has lasted long enough."""
        for i, plan in enumerate(self.plans):
            record = self._active.get(i)
            if record is None:
                if elapsed >= plan.at:
                    self._begin(i, plan)
            elif record.ended is None and elapsed >= plan.at + plan.duration:
                self._end(i, plan, record)

    def finish(self) -> None:
        """End every fault still on (the run is stopping early)."""
        for i, plan in enumerate(self.plans):
            record = self._active.get(i)
            if record is not None and record.ended is None:
                self._end(i, plan, record)

    def _begin(self, i: int, plan: FaultPlan) -> None:
        record = FaultRecord(plan.kind, plan.target, time.time())
        self._active[i] = record
        if plan.kind in self.skipped:
            record.ended = record.began
            record.detail["skipped"] = True
            return
        self.records.append(record)
        self._guarded(record, self._actions(plan)[0])
        log.info("fault began: %s %s", plan.kind, plan.target or "")

    def _end(self, i: int, plan: FaultPlan, record: FaultRecord) -> None:
        self._guarded(record, self._actions(plan)[1])
        record.ended = time.time()
        log.info("fault ended: %s %s", plan.kind, plan.target or "")

    @staticmethod
    def _guarded(record: FaultRecord, action: Callable[[FaultRecord], None]) -> None:
        try:
            action(record)
        except Exception as exc:  # a fault that could not be injected is reported, not fatal
            record.detail.setdefault("errors", []).append(f"{type(exc).__name__}: {exc}")

    def _actions(
        self, plan: FaultPlan
    ) -> tuple[Callable[[FaultRecord], None], Callable[[FaultRecord], None]]:
        role = plan.target or ""
        table: dict[str, tuple[Callable[[FaultRecord], None], Callable[[FaultRecord], None]]] = {
            "worker_kill": (lambda r: self.cluster.kill(role), lambda r: self.cluster.start(role)),
            "beat_kill": (lambda r: self.cluster.kill(role), lambda r: self.cluster.start(role)),
            "worker_pause": (self._pause(role), lambda r: self.cluster.resume(role)),
            "redis_restart": (lambda r: self.redis_server.stop(), self._redis_back),
            "redis_full": (self._fill, self._unfill),
            "pg_terminate": (self._terminate, self._terminate),
        }
        return table[plan.kind]

    def _pause(self, role: str) -> Callable[[FaultRecord], None]:
        def pause(record: FaultRecord) -> None:
            # Stopped in the middle of a turn, the worker wakes up holding a reply it must not
            # send: the case the fenced delivery exists for.
            deadline = time.monotonic() + TURN_WAIT
            while not self.database.turn_running(role) and time.monotonic() < deadline:
                time.sleep(0.02)
            record.detail["mid_turn"] = self.database.turn_running(role)
            if not self.cluster.pause(role):
                record.detail["skipped"] = f"{role} was not running"

        return pause

    def _redis_back(self, record: FaultRecord) -> None:
        self.redis_server.start_on(self._port)

    def _fill(self, record: FaultRecord) -> None:
        record.detail["oom_before"] = self._oom_count()
        used = int(self.admin_redis.info("memory")["used_memory"])
        self.admin_redis.config_set("maxmemory-policy", "noeviction")
        self.admin_redis.config_set("maxmemory", str(used + HEADROOM))
        record.detail["maxmemory"] = used + HEADROOM

    def _unfill(self, record: FaultRecord) -> None:
        self.admin_redis.config_set("maxmemory", "0")
        # Proof that the fault bit: commands Redis refused with OOM while it lasted.
        record.detail["oom_errors"] = self._oom_count() - record.detail.pop("oom_before", 0)

    def _oom_count(self) -> int:
        stats = self.admin_redis.info("errorstats")
        entry = stats.get("errorstat_OOM", {})
        return int(entry.get("count", 0)) if isinstance(entry, dict) else 0

    def _terminate(self, record: FaultRecord) -> None:
        terminated = self.database.terminate_connections()
        record.detail["terminated"] = record.detail.get("terminated", 0) + terminated
