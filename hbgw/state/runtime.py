"""Everything a process talks to below the turn itself, built once from the settings.

The agent and the channel are not here: the wiring in ``hbgw/`` hands them to the turn runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import redis

from hbgw.core.clock import Clock, to_ms, utcnow
from hbgw.core.private import private_dir, write_private
from hbgw.core.settings import Settings
from hbgw.sessions.quotas import OwnerQuotas
from hbgw.sessions.store import Store
from hbgw.state.connection import MAX_CONNECTIONS, connect

# Re-exported: callers import these from here; they live with the connection so that a command
# that only needs Redis (`hbgw stamp`) does not load the SQL store.
from hbgw.state.connection import REDIS_URL_FILE as REDIS_URL_FILE
from hbgw.state.connection import resolve_redis_url as resolve_redis_url
from hbgw.state.due_index import DueIndex
from hbgw.state.due_settle import DueSettle
from hbgw.state.keys import Keys
from hbgw.state.liveness import Liveness
from hbgw.state.ownership import WorkerRegistry
from hbgw.state.redis_part import RedisPart
from hbgw.state.shared_clock import shared_clock
from hbgw.state.stream_wake import wake_streams
from hbgw.state.turn_gate import TurnGate


def write_redis_url(home: Path, url: str | None) -> None:
    path = home / REDIS_URL_FILE
    if url is None:
        path.unlink(missing_ok=True)
    else:
        write_private(private_dir(home) / REDIS_URL_FILE, url + "\n")  # it may hold a password


# Connections beyond one per turn: the registry and clock threads, lock renewals, admission.
SPARE_CONNECTIONS = 16


@dataclass
class Runtime:
    settings: Settings
    store: Store
    client: redis.Redis
    worker: str = "cli"
    clock: Clock = utcnow
    keys: Keys = field(init=False)
    index: DueIndex = field(init=False)
    gate: TurnGate = field(init=False)
    registry: WorkerRegistry = field(init=False)
    liveness: Liveness = field(init=False)
    # The client and the key names, for a unit that needs no more of this runtime.
    redis: RedisPart = field(init=False)
    # Write, then settle: the due index made to agree with SQL (``hbgw/state/due_settle.py``).
    due: DueSettle = field(init=False)

    def __post_init__(self) -> None:
        self.keys = Keys(self.settings.namespace)
        self.index = DueIndex(self.client, self.keys, self.settings.due_shards)
        self.gate = TurnGate(self.client, self.keys)
        self.registry = WorkerRegistry(
            self.client, self.keys, ttl_ms=int(self.settings.worker_ttl * 1000)
        )
        self.liveness = Liveness(self.client, self.keys)
        self.redis = RedisPart(self.client, self.keys)
        store = self.store
        self.due = DueSettle(store.heartbeats, store.sessions, store.jobs, self.index)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        worker: str = "cli",
        turns: int | None = None,
        quotas: OwnerQuotas | None = None,
    ) -> Runtime:
        """``turns``: the turns this process holds at once; each may use a Redis connection.
        ``quotas``: what the store holds each owner to (a worker's: the model's tools set
        heartbeats; none for the operator's ``hbgw`` and for beat, which makes nothing)."""
        store = Store.from_url(settings.effective_database_url, quotas)
        client = connect(
            resolve_redis_url(settings),
            settings,
            lock_lease=settings.lock_lease,
            max_connections=max(MAX_CONNECTIONS, (turns or 0) + SPARE_CONNECTIONS),
        )
        # Redis TIME, not this host's clock: what one process dates, another compares.
        return cls(
            settings=settings,
            store=store,
            client=client,
            worker=worker,
            clock=shared_clock(client, settings),
        )

    def now_ms(self) -> int:
        return to_ms(self.clock())

    def wake_streams(self, session_id: str) -> None:
        """After a delivered message is committed: the API's open event streams of the session
        read it now. Best effort; a lost wake-up waits for the streams' slow poll."""
        wake_streams(self.client, self.keys, session_id)

    def close(self) -> None:
        self.store.close()
        self.client.close()
