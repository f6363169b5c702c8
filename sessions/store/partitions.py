"""PostgreSQL's day partitions of the ledger and the messages (migration 0017, docs/design.md:
Retention): created ahead, and dropped whole once every row in them is past retention and none
must be kept. SQLite has none; its retention is the bounded delete (``retention.py``).

``heartbeat_runs`` is partitioned by ``fire_day`` (the due day of the fire id, so the UNIQUE
``(fire_id, fire_day)`` is the ledger's one-run-per-fire-id), ``messages`` by ``created_at``.
Each has a default partition: a row whose day has no partition (beat down for days, a fire due
before the oldest day) still goes in, and a day created later takes its rows out of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from hbgw.sessions.states import SETTLED, DeliveryState, MessageState, RunState, SessionStatus
from hbgw.sessions.store.base import Transactions, transaction

# Table: its partition key. Partitions are named <table>_pYYYYMMDD, <table>_default.
PARTITIONED = {"heartbeat_runs": "fire_day", "messages": "created_at"}
# Days created ahead of today by the migration and by each retention step.
DAYS_AHEAD = 3
# A drop waits this long for the table's lock, then gives up until the next step: the fire
# path's statements queue behind a waiting ACCESS EXCLUSIVE request, so it must not wait long.
LOCK_TIMEOUT = "2s"
_UPPER = re.compile(r"TO \('(\d{4}-\d{2}-\d{2})")
_OPEN = "('" + "', '".join(sorted([DeliveryState.PENDING, DeliveryState.RETRYING])) + "')"
_SETTLED = "('" + "', '".join(sorted(SETTLED)) + "')"
_IN_FLIGHT = "('" + "', '".join(sorted(set(RunState) - set(SETTLED))) + "')"


class _Changed(Exception):
    """A partition took a row between its read and its lock: left for the next step."""


DropOne = Callable[[Connection, str, datetime], "int | None"]


@dataclass(frozen=True)
class Dropped:
    partitions: int = 0
    rows: int = 0


def day_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def create_day(conn: Connection, table: str, day: date) -> bool:
    """Create ``table``'s partition of ``day`` unless it exists; the rows of that day waiting
    in the default partition move into it. True if it was created."""
    name, key = day_name(table, day), PARTITIONED[table]
    if conn.scalar(text("SELECT to_regclass(:n)"), {"n": name}) is not None:
        return False
    bounds = {"lo": day, "hi": day + timedelta(days=1)}
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    in_day = f"{key} >= :lo AND {key} < :hi"
    waiting = conn.scalar(
        text(f"SELECT EXISTS (SELECT 1 FROM {table}_default WHERE {in_day})"), bounds
    )
    values = f"FOR VALUES FROM ('{day}') TO ('{bounds['hi']}')"
    if not waiting:
        conn.exec_driver_sql(f"CREATE TABLE {name} PARTITION OF {table} {values}")
        return True
    # A partition may not be created over rows the default holds: move them, then attach.
    conn.exec_driver_sql(
        f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    conn.execute(text(f"INSERT INTO {name} SELECT * FROM {table}_default WHERE {in_day}"), bounds)
    conn.execute(text(f"DELETE FROM {table}_default WHERE {in_day}"), bounds)
    conn.exec_driver_sql(f"ALTER TABLE {table} ATTACH PARTITION {name} {values}")
    return True


def create_default(conn: Connection, table: str) -> None:
    conn.exec_driver_sql(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")


def day_partitions(conn: Connection, table: str) -> list[tuple[str, date]]:
    """``table``'s partitions with a range, and the day each ends (exclusive), oldest first."""
    rows = conn.execute(
        text(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(:t)"
        ),
        {"t": table},
    )
    ends = []
    for name, bound in rows:
        upper = _UPPER.search(bound or "")
        if upper:
            ends.append((str(name), date.fromisoformat(upper.group(1))))
    return sorted(ends, key=lambda e: e[1])


class Partitions(Transactions):
    def _partitioned(self) -> bool:
        """Whether this database partitions the ledger (PostgreSQL at 0017 or later)."""
        return self.engine.dialect.name == "postgresql"

    @transaction
    def add_partitions(self, first: date, last: date) -> int:
        """Create the day partitions of both tables from ``first`` to ``last`` (inclusive) that
        are missing, one transaction each; how many were created."""
        if not self._partitioned():
            return 0
        created = 0
        day = first
        while day <= last:
            for table in PARTITIONED:
                with self.engine.begin() as conn:
                    created += create_day(conn, table, day)
            day += timedelta(days=1)
        return created

    @transaction
    def drop_runs_partitions(self, before: datetime, limit: int) -> Dropped:
        """Drop up to ``limit`` run partitions whose days all end by ``before``, their delivery
        records with them, once none of their runs must be kept (retention.py's rules); each
        partition's counted runs are added to their heartbeats' ``retired_runs`` first."""
        return self._drop("heartbeat_runs", before, limit, _drop_runs)

    @transaction
    def drop_messages_partitions(self, before: datetime, limit: int) -> Dropped:
        """As ``drop_runs_partitions``, for the messages past retention."""
        return self._drop("messages", before, limit, _drop_messages)

    def _drop(self, table: str, before: datetime, limit: int, drop: DropOne) -> Dropped:
        if not self._partitioned():
            return Dropped()
        with self.engine.connect() as conn:
            candidates = [n for n, end in day_partitions(conn, table) if end <= before.date()]
        total = Dropped()
        for name in candidates[:limit]:
            try:
                with self.engine.begin() as conn:
                    rows = drop(conn, name, before)
            except _Changed:
                continue
            if rows is not None:
                total = Dropped(total.partitions + 1, total.rows + rows)
        return total


def _drop_runs(conn: Connection, name: str, before: datetime) -> int | None:
    """Drop run partition ``name`` unless it holds a run to keep; the runs it held, or None."""
    cutoff = {"before": before.replace(tzinfo=None), "closed": SessionStatus.CLOSED.value}
    keep = conn.scalar(
        text(
            f"SELECT EXISTS (SELECT 1 FROM {name} r WHERE r.state NOT IN {_SETTLED}"
            " OR r.reserved_at >= :before"
            f" OR EXISTS (SELECT 1 FROM deliveries d WHERE d.run_id = r.id AND d.state IN {_OPEN})"
            " OR (r.job_id IS NOT NULL AND EXISTS (SELECT 1 FROM cron_jobs j JOIN sessions s"
            " ON s.id = r.session_id WHERE j.id = r.job_id AND j.session_id IS NULL"
            " AND s.status <> :closed)))"
        ),
        cutoff,
    )
    if keep:
        return None
    # Read before any lock: the counted runs of each heartbeat, against the set_at they count for.
    counted = conn.execute(
        text(
            f"SELECT h.id, h.set_at, count(*) FROM {name} r"
            " JOIN heartbeats h ON h.id = r.heartbeat_id"
            f" WHERE r.state <> '{RunState.REFUNDED.value}' AND r.reserved_at >= h.set_at"
            " GROUP BY h.id, h.set_at"
        )
    ).all()
    conn.exec_driver_sql(f"DELETE FROM deliveries WHERE run_id IN (SELECT id FROM {name})")
    return _drop_locked(conn, "heartbeat_runs", name, lambda: _retire(conn, counted))


def _retire(conn: Connection, counted: Sequence[Any]) -> None:
    """Add ``counted`` to ``retired_runs`` where the heartbeat's ``set_at`` is still the one
    the runs counted for (a heartbeat set since counts none of them): one executemany."""
    if not counted:
        return
    conn.execute(
        text(
            "UPDATE heartbeats SET retired_runs = CASE WHEN retired_set_at = set_at"
            " THEN coalesce(retired_runs, 0) + :n ELSE :n END, retired_set_at = set_at"
            " WHERE id = :id AND set_at = :set_at"
        ),
        [{"id": row[0], "set_at": row[1], "n": row[2]} for row in counted],
    )


def _drop_messages(conn: Connection, name: str, before: datetime) -> int | None:
    keep = conn.scalar(
        text(
            f"SELECT EXISTS (SELECT 1 FROM {name} m WHERE m.state <> :done"
            " OR EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id"
            f" AND d.state IN {_OPEN})"
            " OR (m.fire_id IS NOT NULL AND EXISTS (SELECT 1 FROM heartbeat_runs r"
            f" WHERE r.fire_id = m.fire_id AND r.state IN {_IN_FLIGHT})))"
        ),
        {"done": MessageState.DONE.value},
    )
    if keep:
        return None
    conn.exec_driver_sql(f"DELETE FROM deliveries WHERE message_id IN (SELECT id FROM {name})")
    return _drop_locked(conn, "messages", name, lambda: None)


def _drop_locked(conn: Connection, table: str, name: str, then: Callable[[], None]) -> int:
    """Take ``table``'s lock (bounded wait), check that nothing came into ``name`` since it was
    read (ids only grow: its highest id is unchanged), run ``then`` and drop it."""
    newest = conn.scalar(text(f"SELECT max(id) FROM {name}"))
    rows = conn.scalar(text(f"SELECT count(*) FROM {name}"))
    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    conn.exec_driver_sql(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    if conn.scalar(text(f"SELECT max(id) FROM {name}")) != newest:
        raise _Changed(name)  # rolls back the deliveries' delete with it
    then()
    conn.exec_driver_sql(f"DROP TABLE {name}")
    return int(rows or 0)
