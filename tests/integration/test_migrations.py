"""Alembic: upgrade from empty and downgrade to empty on every backend."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from hbgw.core.errors import SchemaBehind
from hbgw.sessions.db import (
    current_revision,
    downgrade,
    ensure_schema,
    head_revision,
    make_engine,
    upgrade,
)

TABLES = {"sessions", "messages", "heartbeats", "heartbeat_runs"}


def test_upgrade_then_downgrade(db_url: str) -> None:
    engine = make_engine(db_url)
    assert current_revision(engine) is None
    upgrade(engine)
    assert current_revision(engine) == head_revision(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    downgrade(engine)
    assert current_revision(engine) is None
    assert not TABLES & set(inspect(engine).get_table_names())
    engine.dispose()


def test_sqlite_migrates_itself(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    ensure_schema(engine)
    assert current_revision(engine) == head_revision(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


@pytest.mark.postgres
def test_postgres_behind_says_run_migrate(pg_schema_url: str) -> None:
    engine = make_engine(pg_schema_url)
    with pytest.raises(SchemaBehind, match="hbgw migrate"):
        ensure_schema(engine)
    engine.dispose()


def _insert_session(conn: Connection) -> None:
    conn.execute(
        text(
            "INSERT INTO sessions (id, platform, chat, status, conversation, fence, created_at,"
            " updated_at) VALUES ('s1', 'p', 'c', 'active', 1, 0, :at, :at)"
        ),
        {"at": datetime(2026, 1, 1)},
    )


def _insert_message(conn: Connection, key: str | None) -> None:
    conn.execute(
        text(
            "INSERT INTO messages (session_id, conversation, role, kind, text, state, created_at,"
            " idempotency_key) VALUES ('s1', 1, 'user', 'user', 'hi', 'queued', :at, :key)"
        ),
        {"at": datetime(2026, 1, 1), "key": key},
    )


def test_0002_idempotency_key_up_and_down_keeps_messages(db_url: str) -> None:
    """Issue 7: one key per session (UNIQUE), any number of unkeyed rows, and a clean way back."""
    engine = make_engine(db_url)
    upgrade(engine, "0001")
    with engine.begin() as conn:
        _insert_session(conn)
        conn.execute(
            text(
                "INSERT INTO messages (session_id, conversation, role, kind, text, state,"
                " created_at) VALUES ('s1', 1, 'user', 'user', 'old', 'queued', :at)"
            ),
            {"at": datetime(2026, 1, 1)},
        )
    upgrade(engine, "0002")
    assert current_revision(engine) == "0002"
    with engine.begin() as conn:
        _insert_message(conn, None)
        _insert_message(conn, "k1")
    with pytest.raises(IntegrityError), engine.begin() as conn:
        _insert_message(conn, "k1")
    downgrade(engine, "0001")
    columns = {c["name"] for c in inspect(engine).get_columns("messages")}
    assert "idempotency_key" not in columns
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar() == 3
    engine.dispose()


USAGE_COLUMNS = {"prompt_tokens", "completion_tokens", "model"}


def test_0003_token_usage_up_and_down_keeps_rows(db_url: str) -> None:
    """Token usage on runs and replies: nullable, so older rows read as 'nothing counted'."""
    engine = make_engine(db_url)
    upgrade(engine, "0002")
    with engine.begin() as conn:
        _insert_session(conn)
        _insert_message(conn, "old")
    upgrade(engine, "0003")
    assert current_revision(engine) == "0003"
    for table in ("heartbeat_runs", "messages"):
        assert {c["name"] for c in inspect(engine).get_columns(table)} >= USAGE_COLUMNS
    with engine.begin() as conn:
        old = conn.execute(text("SELECT prompt_tokens, model FROM messages")).one()
        assert tuple(old) == (None, None)
        conn.execute(text("UPDATE messages SET prompt_tokens = 12, model = 'm'"))
    downgrade(engine, "0002")
    for table in ("heartbeat_runs", "messages"):
        assert not USAGE_COLUMNS & {c["name"] for c in inspect(engine).get_columns(table)}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar() == 1
    engine.dispose()


RESTORE_INDEXES = {
    "heartbeats": "ix_heartbeats_status_session",
    "messages": "ix_messages_state_id",
    "heartbeat_runs": "ix_heartbeat_runs_state_reserved",
}


def _indexes(engine: Engine, table: str) -> set[str]:
    return {str(i["name"]) for i in inspect(engine).get_indexes(table)}


def test_0004_restore_indexes_up_and_down_keeps_rows(db_url: str) -> None:
    """Issue 10: every read of the paged restore pass is a range of an index."""
    engine = make_engine(db_url)
    upgrade(engine, "0003")
    with engine.begin() as conn:
        _insert_session(conn)
        _insert_message(conn, "queued-before")
    upgrade(engine, "0004")
    for table, index in RESTORE_INDEXES.items():
        assert index in _indexes(engine, table)
    assert "ix_messages_state" not in _indexes(engine, "messages")  # the new one's prefix
    downgrade(engine, "0003")
    for table, index in RESTORE_INDEXES.items():
        assert index not in _indexes(engine, table)
    assert "ix_messages_state" in _indexes(engine, "messages")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar() == 1
    engine.dispose()


def test_0005_delivering_fence_up_and_down_keeps_messages(db_url: str) -> None:
    """Issue 15: the user turn's durable mark before it sends; older messages were never
    marked (NULL: no older grant was about to send their reply)."""
    engine = make_engine(db_url)
    upgrade(engine, "0004")
    with engine.begin() as conn:
        _insert_session(conn)
        _insert_message(conn, "before-0005")
    upgrade(engine, "0005")
    assert "delivering_fence" in {c["name"] for c in inspect(engine).get_columns("messages")}
    with engine.begin() as conn:
        assert conn.execute(text("SELECT delivering_fence FROM messages")).scalar() is None
        conn.execute(text("UPDATE messages SET delivering_fence = 3"))
    downgrade(engine, "0004")
    assert "delivering_fence" not in {c["name"] for c in inspect(engine).get_columns("messages")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar() == 1
    engine.dispose()


def test_0006_owner_index_up_and_down_keeps_sessions(db_url: str) -> None:
    """Issue 15: the per-owner session quota counts by (owner, status), not by a table scan."""
    engine = make_engine(db_url)
    upgrade(engine, "0005")
    with engine.begin() as conn:
        _insert_session(conn)
    upgrade(engine, "0006")
    assert "ix_sessions_owner_status" in _indexes(engine, "sessions")
    downgrade(engine, "0005")
    assert "ix_sessions_owner_status" not in _indexes(engine, "sessions")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM sessions")).scalar() == 1
    engine.dispose()


def test_0007_deliveries_up_and_down_keeps_runs_and_messages(db_url: str) -> None:
    """Issue 16: the delivery record, a new table; older runs and messages have none, and a
    record belongs to a run or to a message, never both nor neither."""
    engine = make_engine(db_url)
    upgrade(engine, "0006")
    with engine.begin() as conn:
        _insert_session(conn)
        _insert_message(conn, "before-0007")
    upgrade(engine, "0007")
    assert "deliveries" in inspect(engine).get_table_names()
    assert "ix_deliveries_state_updated" in _indexes(engine, "deliveries")
    row = (
        "INSERT INTO deliveries (run_id, message_id, session_id, channel, delivery_key, kind,"
        " fence, state, attempts, created_at, updated_at) VALUES (NULL, {message}, 's1', 'file',"
        " :key, 'reply', 1, 'pending', 1, :at, :at)"
    )
    at = datetime(2026, 1, 1)
    with engine.begin() as conn:
        message = conn.execute(text("SELECT id FROM messages")).scalar()
        conn.execute(text(row.format(message=message)), {"key": "msg:1", "at": at})
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text(row.format(message="NULL")), {"key": "msg:2", "at": at})
    downgrade(engine, "0006")
    assert "deliveries" not in inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar() == 1
    engine.dispose()


def test_0009_webhook_url_up_and_down_keeps_sessions_and_their_messages(db_url: str) -> None:
    """Issue 17: a webhook session's URL, a nullable column; older sessions have none."""
    engine = make_engine(db_url)
    upgrade(engine, "0008")
    with engine.begin() as conn:
        _insert_session(conn)
        _insert_message(conn, "before-0009")
    upgrade(engine, "0009")
    columns = {c["name"] for c in inspect(engine).get_columns("sessions")}
    assert "webhook_url" in columns
    with engine.begin() as conn:
        assert conn.execute(text("SELECT webhook_url FROM sessions")).scalar() is None
        conn.execute(text("UPDATE sessions SET webhook_url = 'https://hooks.example/in'"))
    downgrade(engine, "0008")
    assert "webhook_url" not in {c["name"] for c in inspect(engine).get_columns("sessions")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM sessions")).scalar() == 1
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar() == 1
    engine.dispose()


def test_0011_job_retries_up_and_down_keeps_jobs(db_url: str) -> None:
    """Issue 18: a job's retry ladder; jobs made before it have none (0, NULL)."""
    engine = make_engine(db_url)
    upgrade(engine, "0010")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO cron_jobs (id, prompt, schedule_text, interval_seconds, platform, "
                "chat, missed_policy, status, anchor_at, fire_count, generation, created_at, "
                "updated_at) VALUES ('j0', 'x', 'every 1h', 3600, 'cli', 'c', 'coalesce', "
                "'active', :t, 0, 1, :t, :t)"
            ),
            {"t": datetime(2026, 12, 1)},
        )
    upgrade(engine, "0011")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT retries, retry_at FROM cron_jobs")).one()
    assert tuple(row) == (0, None)
    downgrade(engine, "0010")
    assert "retries" not in {c["name"] for c in inspect(engine).get_columns("cron_jobs")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM cron_jobs")).scalar() == 1
    engine.dispose()
