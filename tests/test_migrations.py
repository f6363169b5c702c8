"""Alembic: upgrade from empty and downgrade to empty on every backend."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from core.errors import SchemaBehind
from sessions.db import (
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
