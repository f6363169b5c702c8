"""Faults on a schedule: each begins, lasts its duration, ends, and is recorded with both times.

A fault's end is when the harness removed the condition (a killed role restarted, Redis back,
memory raised, a paused worker resumed); how long the system then needs is measured afterwards
from the ledger (chaos/recovery.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from chaos.cluster import Cluster, PinnedRedis
from chaos.database import Database
from chaos.pgcluster import PrivatePostgres
from chaos.profiles import (
    HANG_LATENCY,
    HANG_SLOW,
    RESTART_DOWN,
    RESTART_EVERY,
    FaultPlan,
)
from chaos.proxy import RedisProxy
from chaos.skew import measured_skew

log = logging.getLogger("chaos.faults")
HEADROOM = 16 * 1024  # bytes above used_memory: the next few writes hit the limit
# redis_evict: another database of the same server (the "another tenant") writes this
# much ballast this often past maxmemory: Redis evicts the coldest keys of the whole server, the
# gateway's idle fences, stamps and bindings among them (allkeys-lru).
BALLAST_DB = 1
BALLAST_BYTES = 512
BALLAST_EVERY = 0.05
EVICT_ROOM = 256 * 1024  # bytes of maxmemory above used_memory: ballast fills them first
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
    proxies: dict[str, RedisProxy] = field(default_factory=dict)
    pg_server: PrivatePostgres | None = None
    skew_env: dict[str, str] | None = None  # None: no libfaketime here
    skipped: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)  # why a kind was skipped
    _active: dict[int, FaultRecord] = field(default_factory=dict)
    _port: int = 0
    _cycling: threading.Thread | None = None
    _ballast: threading.Thread | None = None
    _ballast_stop: threading.Event = field(default_factory=threading.Event)
    _halt: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._port = self.redis_server.port
        if self.database.kind != "postgresql":
            self._skip("pg_terminate", "the run is on SQLite")
        if self.pg_server is None or not self.database.private:
            self._skip("pg_restart", "no private PostgreSQL cluster (no initdb, or it failed)")
        if self.skew_env is None:
            self._skip("clock_skew", "libfaketime is not installed")

    def _skip(self, kind: str, why: str) -> None:
        self.skipped.append(kind)
        self.notes[kind] = why

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
        self._halt.set()
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
            "redis_hang": (self._hang(plan), self._heal(role)),
            "redis_restarts": (self._restarts(plan), self._restarts_done),
            "pg_restart": (self._pg_down, self._pg_up),
            "clock_skew": (self._skew(role, on=True), self._skew(role, on=False)),
            "redis_evict": (self._evict, self._evict_done),
        }
        return table[plan.kind]

    # -- issue 15: a hung network, many restarts, the database server, a wrong clock --------

    def _hang(self, plan: FaultPlan) -> Callable[[FaultRecord], None]:
        def hang(record: FaultRecord) -> None:
            proxy = self.proxies[plan.target or ""]  # KeyError: the role has no proxy
            record.detail["before"] = vars(proxy.stats).copy()
            hang_s = max(0.0, plan.duration - HANG_SLOW)
            proxy.hang(hang_s, HANG_SLOW, HANG_LATENCY)
            record.detail.update(hang_s=round(hang_s, 1), slow_s=HANG_SLOW)
            record.detail["open_connections"] = proxy.stats.open_during_hang

        return hang

    def _heal(self, role: str) -> Callable[[FaultRecord], None]:
        def heal(record: FaultRecord) -> None:
            proxy = self.proxies[role]
            proxy.heal()
            # Proof that the hang bit: what the proxy held back, and for how long.
            before = record.detail.pop("before", {})
            now = vars(proxy.stats)
            for name in ("held_chunks", "delayed_chunks", "connections"):
                record.detail[name] = now[name] - before.get(name, 0)
            record.detail["longest_hold_s"] = now["longest_hold_s"]

        return heal

    def _restarts(self, plan: FaultPlan) -> Callable[[FaultRecord], None]:
        count = max(1, round(plan.duration / RESTART_EVERY))

        def cycle(record: FaultRecord) -> None:
            run_ids: list[str] = []
            record.detail["run_ids"] = run_ids
            started = time.monotonic()
            for n in range(count):
                if self._halt.wait(max(0.0, started + n * RESTART_EVERY - time.monotonic())):
                    break
                self.redis_server.stop()
                time.sleep(RESTART_DOWN)
                self.redis_server.start_on(self._port)
                run_ids.append(str(self.admin_redis.info("server")["run_id"]))

        def begin(record: FaultRecord) -> None:
            self._cycling = threading.Thread(
                target=self._guarded, args=(record, cycle), name="chaos-restarts", daemon=True
            )
            self._cycling.start()

        return begin

    def _restarts_done(self, record: FaultRecord) -> None:
        if self._cycling is not None:
            self._cycling.join(30)
        run_ids = record.detail.pop("run_ids", [])
        # Proof: each restart was a new, empty server (a new run id every time).
        record.detail.update(restarts=len(run_ids), distinct_servers=len(set(run_ids)))

    def _pg_down(self, record: FaultRecord) -> None:
        assert self.pg_server is not None
        record.detail["connections_before"] = self.database.connections()
        record.detail["postmaster_before"] = self.pg_server.postmaster_pid()
        self.pg_server.down()

    def _pg_up(self, record: FaultRecord) -> None:
        assert self.pg_server is not None
        self.pg_server.up()
        record.detail["postmaster_after"] = self.pg_server.postmaster_pid()

    def _skew(self, target: str, *, on: bool) -> Callable[[FaultRecord], None]:
        def skew(record: FaultRecord) -> None:
            extra = dict(self.skew_env or {}) if on else {}
            pids = {role: self.cluster.restart(role, extra) for role in target.split("+")}
            record.detail["skewed_pids" if on else "restored_pids"] = pids
            if on:
                # Proof: the roles run with libfaketime preloaded, and a process started with
                # this environment sees its clock this far off.
                record.detail["preloaded"] = {r: _preloaded(pid) for r, pid in pids.items()}
                record.detail["skew_measured_s"] = measured_skew(extra)

        return skew

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

    # -- issue 29: Redis evicting the gateway's keys -----------------------------------------

    def _ballast_client(self) -> redis.Redis:
        """A client of the chaos Redis' other database, BALLAST_DB."""
        url = urlsplit(self.redis_server.url)._replace(path=f"/{BALLAST_DB}")
        return redis.Redis.from_url(urlunsplit(url))

    def _evicted_total(self) -> int:
        return int(self.admin_redis.info("stats")["evicted_keys"])

    def _evict(self, record: FaultRecord) -> None:
        """allkeys-lru (the roles accept it: HBGW_REDIS_ACCEPT_EVICTION in the profile) with
        maxmemory a little above what is used now; ballast in another database fills that
        room at once, then keeps coming: Redis evicts the coldest keys of the whole server.
        (A limit at what is used refuses writes instead: with a small dataset, client buffers
        alone cross it and nothing evictable is left — redis_full, not this.)"""
        record.detail["evicted_before"] = self._evicted_total()
        used = int(self.admin_redis.info("memory")["used_memory"])
        self.admin_redis.config_set("maxmemory-policy", "allkeys-lru")
        self.admin_redis.config_set("maxmemory", str(used + EVICT_ROOM))
        record.detail["maxmemory"] = used + EVICT_ROOM
        ballast = self._ballast_client()
        self._ballast_stop.clear()
        counts = {"written": 0, "refused": 0}

        def put() -> None:
            try:
                ballast.set(f"ballast:{counts['written']}", "x" * BALLAST_BYTES)
                counts["written"] += 1
            except redis.OutOfMemoryError:
                counts["refused"] += 1

        # The room filled now (bounded), so evicting starts with the fault, not seconds later.
        for _ in range(2 * EVICT_ROOM // (16 * BALLAST_BYTES)):  # twice the room at most
            if self._evicted_total() > record.detail["evicted_before"]:
                break
            for _ in range(16):
                put()

        def trickle(record: FaultRecord) -> None:
            try:
                while not self._ballast_stop.wait(BALLAST_EVERY):
                    put()
            finally:
                record.detail.update(ballast_written=counts["written"])
                record.detail.update(ballast_refused=counts["refused"])
                ballast.close()

        self._ballast = threading.Thread(
            target=self._guarded, args=(record, trickle), name="chaos-ballast", daemon=True
        )
        self._ballast.start()

    def _evict_done(self, record: FaultRecord) -> None:
        self._ballast_stop.set()
        if self._ballast is not None:
            self._ballast.join(10)
        self.admin_redis.config_set("maxmemory", "0")
        self.admin_redis.config_set("maxmemory-policy", "noeviction")
        ballast = self._ballast_client()
        try:
            kept = int(ballast.dbsize())
            ballast.flushdb()
        finally:
            ballast.close()
        # Proof that the fault bit: keys Redis evicted, and how many of them were not ballast.
        evicted = self._evicted_total() - record.detail.pop("evicted_before", 0)
        lost_ballast = int(record.detail.get("ballast_written", 0)) - kept
        record.detail.update(evicted_keys=evicted, gateway_keys_evicted=evicted - lost_ballast)

    def _terminate(self, record: FaultRecord) -> None:
        terminated = self.database.terminate_connections()
        record.detail["terminated"] = record.detail.get("terminated", 0) + terminated


def _preloaded(pid: int | None) -> bool:
    """Whether process ``pid`` (our child) runs with libfaketime in its environment."""
    if pid is None:
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return b"LD_PRELOAD=" in environ and b"libfaketime" in environ and b"FAKETIME=" in environ
