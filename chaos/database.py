"""The run's SQL store: a fresh PostgreSQL schema (dropped afterwards), or SQLite as a fallback.

The schema is on the run's private cluster (chaos/pgcluster.py) when PostgreSQL is installed,
so both database faults (``pg_terminate`` and ``pg_restart``) apply to a server of its own;
otherwise on the shared server (``CHAOS_POSTGRES_URL``; never restarted: ``pg_restart`` is
skipped), and on SQLite when no PostgreSQL answers (both skipped).

Every connection of the deployment carries ``application_name=<tag>`` so the database fault can
terminate exactly this run's connections and nobody else's; the harness's own admin connection
has another name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, text

from hbgw.core.errors import HbgwError

PG_URL = os.environ.get(
    "CHAOS_POSTGRES_URL",
    os.environ.get("HBGW_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
)


@dataclass
class Database:
    url: str  # what the roles and the edge connect with
    kind: str  # postgresql | sqlite
    tag: str
    schema: str | None = None
    admin: Engine | None = None
    private: bool = False  # on the run's own cluster: it may be restarted

    def connections(self) -> int:
        """How many connections of this run the server has right now."""
        if self.admin is None:
            return 0
        with self.admin.begin() as conn:
            count = conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :tag"),
                {"tag": self.tag},
            ).scalar()
        return int(count or 0)

    def terminate_connections(self) -> int:
        """pg_terminate_backend on every connection of this run; how many there were."""
        if self.admin is None:
            return 0
        with self.admin.begin() as conn:
            rows = conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = :tag AND pid <> pg_backend_pid()"
                ),
                {"tag": self.tag},
            ).all()
        return len(rows)

    def turn_running(self, worker: str) -> bool:
        """Whether ``worker`` has a heartbeat turn between its start and its end right now."""
        if self.admin is None or self.schema is None:
            return False
        with self.admin.begin() as conn:
            row = conn.execute(
                text(
                    f'SELECT 1 FROM "{self.schema}".heartbeat_runs '
                    "WHERE worker = :worker AND state = 'started' LIMIT 1"
                ),
                {"worker": worker},
            ).first()
        return row is not None

    def drop(self) -> None:
        if self.admin is None or self.schema is None:
            return
        if self.private:  # the whole cluster is removed after this
            self.admin.dispose()
            return
        self.terminate_connections()  # a leftover connection would hold a lock on the schema
        with self.admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))
        self.admin.dispose()


def _postgres_answers(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        return True
    except Exception:
        return False


def provision(
    tag: str, home: Path, *, require_postgres: bool, server_url: str | None = None
) -> Database:
    """A fresh schema on ``server_url`` (the run's private cluster) or PG_URL; SQLite in
    ``home`` when PostgreSQL does not answer (unless required: CI must exercise the PostgreSQL
    faults)."""
    base = server_url or PG_URL
    admin = create_engine(
        base,
        connect_args={"connect_timeout": 3, "application_name": f"{tag}-admin"},
        pool_pre_ping=True,  # the admin connection outlives a pg_restart
    )
    if not _postgres_answers(admin):
        admin.dispose()
        if require_postgres:
            raise HbgwError(f"PostgreSQL is required (CI is set) but {base} does not answer.")
        return Database(url=f"sqlite:///{home / 'chaos.sqlite3'}", kind="sqlite", tag=tag)
    schema = tag.replace("-", "_")
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    joiner = "&" if "?" in base else "?"
    options = quote(f"-csearch_path={schema}")
    url = f"{base}{joiner}application_name={tag}&options={options}"
    return Database(
        url=url, kind="postgresql", tag=tag, schema=schema, admin=admin,
        private=server_url is not None,
    )  # fmt: skip
