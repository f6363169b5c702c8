"""A fleet of idle scheduled sessions, written straight into SQL and Redis for the benchmarks.

Sessions and heartbeats are bulk-inserted (SQLAlchemy core, executemany in chunks), not
through the per-session store API: a million rows in seconds, not hours. The rows are what
``set_heartbeat`` leaves (active session, active interval heartbeat, anchor, next due); the
index and the turn gate then get what the restore pass writes for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from bench.beat_rig import BeatRig, session_ids
from hbgw.core.clock import to_ms
from hbgw.sessions.states import HeartbeatStatus, SessionStatus

INTERVAL_S = 3600
CHUNK = 20_000
# Not-due heartbeats fall due over the next hour, spread, never within the benchmark.
FUTURE_SPREAD_S = 3000
FUTURE_MIN_S = 300


@dataclass(frozen=True)
class Fleet:
    due_ids: list[str]
    due_ms: int  # when the due ones fell due
    size: int


def _anchor(index: int, due: int, now: datetime) -> datetime:
    """Due ones fell due a second ago; the others are due FUTURE_MIN_S.. seconds from now."""
    if index < due:
        return now - timedelta(seconds=INTERVAL_S + 1)
    ahead = FUTURE_MIN_S + index % FUTURE_SPREAD_S
    return now - timedelta(seconds=INTERVAL_S - ahead)


SESSION_COLUMNS = (
    "id, platform, chat, status, conversation, fence, created_at, updated_at",
    "?, 'bench', 'C1', ?, 1, 0, ?, ?",
)
HEARTBEAT_COLUMNS = (
    "session_id, prompt, schedule_text, interval_seconds, status, anchor_at, set_at, "
    "next_due_at, fire_count, generation, origin_chat, created_at, updated_at",
    "?, 'check CI', 'every 1h', ?, ?, ?, ?, ?, 0, 1, 'C1', ?, ?",
)


def _sqlite_time(value: datetime) -> str:
    """How SQLAlchemy's SQLite DateTime stores the naive UTC that ``UTCDateTime`` hands it."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def insert_sql(
    engine: sa.Engine, ids: Sequence[str], anchors: Sequence[datetime], now: datetime
) -> None:
    """The rows ``create_session`` + ``set_heartbeat`` leave, by executemany in chunks.

    Straight to the driver (SQLite only): the ORM's per-value conversions made a million rows
    take minutes. The smoke test reads them back through the store to keep the format honest.
    """
    if engine.dialect.name != "sqlite":
        raise ValueError(f"insert_sql writes SQLite's storage format, not {engine.dialect.name}")
    stamp, active = _sqlite_time(now), SessionStatus.ACTIVE.value
    hb_active, interval = HeartbeatStatus.ACTIVE.value, timedelta(seconds=INTERVAL_S)
    insert_sessions = "INSERT INTO sessions ({}) VALUES ({})".format(*SESSION_COLUMNS)
    insert_heartbeats = "INSERT INTO heartbeats ({}) VALUES ({})".format(*HEARTBEAT_COLUMNS)
    for start in range(0, len(ids), CHUNK):
        part = range(start, min(len(ids), start + CHUNK))
        sessions = [(ids[i], active, stamp, stamp) for i in part]
        heartbeats = []
        for i in part:
            anchor = _sqlite_time(anchors[i])
            due = _sqlite_time(anchors[i] + interval)
            row = (ids[i], INTERVAL_S, hb_active, anchor, anchor, due, stamp, stamp)
            heartbeats.append(row)
        with engine.begin() as conn:
            conn.exec_driver_sql(insert_sessions, sessions)
            conn.exec_driver_sql(insert_heartbeats, heartbeats)


def seed_idle(rig: BeatRig, ids: Sequence[str]) -> None:
    """What ``TurnGate.seed_many`` leaves for a new idle session (its fence, 0), by MSET.

    Only for sessions with no Redis state yet, where the script's checks all pass; one MSET
    per chunk instead of a script call per session (the memory benchmark uses the script).
    """
    keys = rig.rt.keys
    for start in range(0, len(ids), CHUNK):
        values: dict[str, str] = {}
        for sid in ids[start : start + CHUNK]:
            values[keys.fence(sid)] = "0"
        rig.client.mset(values)


def build_fleet(rig: BeatRig, size: int, due: int, now: datetime, *, sql: bool = True) -> Fleet:
    """``size`` scheduled idle sessions, ``due`` of them due now, in SQL and in Redis."""
    ids = session_ids(size)
    anchors = [_anchor(i, due, now) for i in range(size)]
    if sql:
        insert_sql(rig.rt.store.engine, ids, anchors, now)
    interval = timedelta(seconds=INTERVAL_S)
    for start in range(0, size, CHUNK):
        part = range(start, min(size, start + CHUNK))
        rig.rt.index.schedule_many({ids[i]: to_ms(anchors[i] + interval) for i in part})
    seed_idle(rig, ids)
    due_ms = to_ms(now - timedelta(seconds=1))
    return Fleet(due_ids=ids[:due], due_ms=due_ms, size=size)
