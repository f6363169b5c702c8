"""SQL fixtures: one store contract, every backend (SQLite always, PostgreSQL when reachable).

PostgreSQL tests skip on a laptop without it, but never when ``CI`` is set: there a missing
server is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.store import Store

PG_URL = os.environ.get(
    "HBGW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def postgres_available() -> bool:
    try:
        engine = create_engine(PG_URL, connect_args={"connect_timeout": 2})
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return True
    except Exception:
        return False


_PG_UP: bool | None = None


def require_postgres() -> None:
    global _PG_UP
    if _PG_UP is None:
        _PG_UP = postgres_available()
    if not _PG_UP:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI but {PG_URL} does not answer.")
        pytest.skip(f"PostgreSQL not reachable at {PG_URL}")


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    require_postgres()
    schema = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'hbgw.sqlite3'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
def migrated_engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def store(migrated_engine: Engine) -> Iterator[Store]:
    yield Store(migrated_engine)
