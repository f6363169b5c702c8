"""Engines and schema management (Alembic).

Alembic is imported only to migrate or when the quick check cannot tell: with its templating
and highlighting it costs more to import than a CLI command's whole work (`hbgw heartbeat
status` opens the store on every call), so a schema already at the head is recognised from the
migration files' own ``revision`` lines and the ``alembic_version`` table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from hbgw.core.errors import SchemaBehind, StoreError
from hbgw.core.masking import mask_url
from hbgw.core.private import private_dir, touch_private
from hbgw.sessions.schema_head import MIGRATIONS, file_head

if TYPE_CHECKING:
    from alembic.config import Config


def make_engine(url: str) -> Engine:
    """An engine with the project's connection habits for SQLite and PostgreSQL."""
    if url.startswith("postgresql://"):
        # psycopg 3 is the driver we ship; the bare scheme would pick psycopg2.
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    # No pre-ping: it costs a round trip per transaction (~10 per heartbeat turn). A pooled
    # connection the server dropped fails at its first statement, before anything is written,
    # and every store method runs again on a fresh connection (sessions/store/base.py).
    return create_engine(url, future=True)


def _sqlite_engine(url: str) -> Engine:
    path = url.split("///", 1)[-1]
    if path and path != ":memory:":
        # Private from the first byte: it holds every message and reply (its -wal and -shm
        # files take its mode).
        touch_private(private_dir(Path(path).parent) / Path(path).name)
    in_memory = not path or path == ":memory:"
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        # A file is shared safely by pooled connections of several threads and processes
        # (SQLite's own locks, BEGIN IMMEDIATE below); pooling saves a connect and three
        # PRAGMAs per transaction. An in-memory database exists per connection: no pool.
        **({"poolclass": NullPool} if in_memory else {"pool_size": 8, "max_overflow": 8}),
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN itself (below) instead of pysqlite's deferred BEGIN.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front, so two writers queue instead of deadlocking
        # on a read-to-write upgrade.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def head_revision(engine: Engine) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:
        raise StoreError(
            f"Cannot read the database at {mask_url(str(engine.url))}: {exc.__class__.__name__}: "
            f"{exc.orig if hasattr(exc, 'orig') else exc} — check HBGW_DATABASE_URL."
        ) from exc


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(alembic_config(engine), revision)


def ensure_schema(engine: Engine) -> None:
    """SQLite (the embedded store) migrates itself; any other database must be migrated first."""
    if _at_file_head(engine):
        return
    current = current_revision(engine)
    head = head_revision(engine)
    if current == head:
        return
    if engine.dialect.name == "sqlite":
        upgrade(engine)
        return
    raise SchemaBehind(
        f"The database schema is at {current or 'nothing'} but this version needs {head} — "
        "run `hbgw migrate` first."
    )


def _at_file_head(engine: Engine) -> bool:
    """True only when the database says it is at the files' head; any doubt (no table, an
    error, another revision) leaves the decision to Alembic."""
    head = file_head()
    if head is None:
        return False
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    except SQLAlchemyError:
        return False
    return [tuple(r) for r in rows] == [(head,)]
