"""`hbgw heartbeat status` read straight from the DBAPI driver (sqlite3, psycopg), without
SQLAlchemy: its import alone (~0.37 s) was most of the command, which scripts poll.

The store's read (``HeartbeatRecords.heartbeat_status``) stays the reference: this one reads the
same three things (the session, its heartbeat row, the tokens its runs spent today) and builds
the view with the same code (``heartbeat_view``). It answers only a database it can trust as it
is: a SQLite file or a PostgreSQL URL it knows, at the migration files' head. Anything else — a
URL it does not read, a file not there yet, a schema to migrate, a driver error — gives None,
and the caller opens the store, which migrates, refuses or explains in its own words.
tests/test_status_read.py checks both reads agree, on both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol
from urllib.parse import urlsplit

from hbgw.sessions.heartbeat_view import HeartbeatStatusView, heartbeat_state, no_session, utc_day
from hbgw.sessions.schema_head import file_head
from hbgw.sessions.states import HeartbeatStatus

SQLITE_SCHEMES = ("sqlite", "sqlite+pysqlite")
POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg")
# What ``heartbeat_state`` reads of a heartbeats row, and the row's id for its runs.
COLUMNS = (
    "id", "session_id", "prompt", "schedule_text", "interval_seconds", "cron", "timezone",
    "status", "anchor_at", "fire_count", "generation", "origin_chat", "origin_thread",
    "last_fired_at", "last_outcome", "paused_reason", "active_hours", "exact", "ends_at",
    "max_fires", "daily_tokens", "model", "budget_source", "dedupe_seconds", "backoff_seconds",
    "quiet_fires", "last_reply_hash", "last_reply_at",
)  # fmt: skip
# UTCDateTime columns (naive UTC in the table; aware UTC once read, as the model returns them).
TIMES = frozenset({"anchor_at", "last_fired_at", "ends_at", "last_reply_at"})
# {p}: the driver's placeholder (sqlite3 ``?``, psycopg ``%s``).
HEAD = "SELECT version_num FROM alembic_version"
SESSION = "SELECT id FROM sessions WHERE id = {p}"
HEARTBEAT = f"SELECT {', '.join(COLUMNS)} FROM heartbeats WHERE session_id = {{p}}"
SPENT = (
    "SELECT sum(prompt_tokens + completion_tokens) FROM heartbeat_runs "
    "WHERE heartbeat_id = {p} AND reserved_at >= {p} AND reserved_at < {p}"
)  # as heartbeat_costs.tokens_on_day_in


class _Cursor(Protocol):
    def execute(self, query: Any, params: Sequence[Any] = ..., /) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class _Read:
    """One transaction's reads on a DBAPI cursor, with its driver's placeholder and times."""

    def __init__(self, cursor: _Cursor, mark: str, bind_time: Callable[[datetime], Any]) -> None:
        self.cursor, self.mark, self.bind_time = cursor, mark, bind_time

    def rows(self, query: str, *params: Any) -> list[Any]:
        self.cursor.execute(query.format(p=self.mark), params)
        return self.cursor.fetchall()

    def status(self, session_id: str, now: datetime) -> HeartbeatStatusView | None:
        """The view; None when the schema is not at the files' head (the store decides)."""
        head = file_head()
        if head is None or [tuple(r) for r in self.rows(HEAD)] != [(head,)]:
            return None
        if not self.rows(SESSION, session_id):
            raise no_session(session_id)
        found = self.rows(HEARTBEAT, session_id)
        if not found:
            return HeartbeatStatusView(session_id, None, now)
        row = SimpleNamespace(**dict(zip(COLUMNS, found[0], strict=True)))
        for name in TIMES:
            setattr(row, name, _aware(getattr(row, name)))
        row.status = HeartbeatStatus(row.status)  # as the model's StateText returns it
        row.exact = None if row.exact is None else bool(row.exact)  # SQLite keeps 0 and 1
        start = utc_day(now)
        end = start + timedelta(days=1)
        [(spent,)] = self.rows(SPENT, row.id, self.bind_time(start), self.bind_time(end))
        return HeartbeatStatusView(session_id, heartbeat_state(row), now, int(spent or 0))


def read_status(url: str, session_id: str, now: datetime) -> HeartbeatStatusView | None:
    """The session's heartbeat status read from ``url``'s driver; None when the store must
    answer (module doc). A missing session raises the store's ``NotFound``."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None
    if scheme in SQLITE_SCHEMES:
        return _sqlite(url, session_id, now)
    if scheme in POSTGRES_SCHEMES:
        return _postgres(url, session_id, now)
    return None


def _aware(value: Any) -> datetime | None:
    if value is None:
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment.replace(tzinfo=UTC)


def _naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def _sqlite_time(moment: datetime) -> str:
    # SQLAlchemy's SQLite DATETIME text, which the table holds and compares as text.
    return _naive_utc(moment).strftime("%Y-%m-%d %H:%M:%S.%f")


def _sqlite(url: str, session_id: str, now: datetime) -> HeartbeatStatusView | None:
    import sqlite3

    path = url.split("///", 1)[-1] if "///" in url else ""
    if not path or path == ":memory:" or any(c in path for c in "?%") or path.startswith("file:"):
        return None  # in memory, URL options, quoting: SQLAlchemy's reading of it decides
    if not Path(path).is_file():
        return None  # the store creates and migrates it
    try:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        cursor = conn.cursor()
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("BEGIN")  # one snapshot for the three reads, as the store's transaction
        return _Read(cursor, "?", _sqlite_time).status(session_id, now)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _postgres(url: str, session_id: str, now: datetime) -> HeartbeatStatusView | None:
    import psycopg

    rest = url.partition("://")[2]
    try:
        conn = psycopg.connect(f"postgresql://{rest}")
    except psycopg.Error:
        return None
    try:
        with conn.cursor() as cursor:
            return _Read(cursor, "%s", _naive_utc).status(session_id, now)
    except psycopg.Error:
        return None
    finally:
        conn.close()
