"""day partitions: the ledger and the messages partitioned by day on PostgreSQL

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03

PostgreSQL: ``heartbeat_runs`` and ``messages`` become range-partitioned tables of one
partition a day, so retention drops a day as a catalogue change instead of deleting its rows
(sessions/store/partitions.py). Every unique constraint of a partitioned table must include its
partition key, so the keys are chosen to keep what the ledger relies on:

- runs by ``fire_day``, the UTC day of the fire id's due time (``states.fire_day``; a fire id
  is ``<member>:<due_ms>``). The day is a function of the fire id, enforced by a CHECK, so
  ``UNIQUE (fire_id, fire_day)`` admits exactly what ``UNIQUE (fire_id)`` admitted: at most
  one run per fire id (I2) across all partitions, and the reservation's IntegrityError race
  behaves as before. The primary key is ``(id, fire_day)``; ids come from one sequence.
- messages by ``created_at``. ``UNIQUE (session_id, idempotency_key, created_at)`` is only the
  backstop now; the promise (a retry gets the first message back) is kept where it always was
  decided, by ``accept_message`` under the session's row lock, which reads the key first.
- ``deliveries.run_id`` and ``.message_id`` lose their foreign keys: a key into a partitioned
  table must name its whole unique key (the partition key too), which would put a second
  column and a read on every delivery write of the fire path. A delivery record is written in
  the transaction of the step that owns its run or message, and retention deletes the records
  in the transaction that drops their partition; nothing else deletes runs or messages.

Existing rows are moved: the table is renamed, the partitioned one created with the same
columns (``LIKE``), the rows copied, the sequence handed over and the old table dropped, all in
this one migration's transaction (the tables are locked for the copy: plan a window for a large
ledger). Rows older than today go to one ``_history`` partition (dropped once wholly past
retention; until then the bounded delete trims it), today's and the next days' to their day,
anything else to ``_default``. SQLite keeps its tables and gains the ``fire_day`` column.

The ids of the runs, the messages and the deliveries, and the columns that hold them
(``messages.reply_to``, ``deliveries.run_id``, ``.message_id``), become 64-bit with their
sequences (``models.LEDGER_ID``): at 288 million runs a day, 32 bits last about a week. The
partitioned tables are made 64-bit before their rows come in; ``deliveries`` is rewritten in
place. SQLite's INTEGER is 64-bit already.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

from hbgw.sessions.states import fire_day
from hbgw.sessions.store.partitions import DAYS_AHEAD, create_day, create_default

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

FIRE_DAY = "DATE '1970-01-01' + (substring(fire_id from ':([0-9]+)$')::bigint / 86400000)::int"
RUNS_INDEXES = {
    "ix_heartbeat_runs_heartbeat_id": "heartbeat_id",
    "ix_heartbeat_runs_job_id": "job_id",
    "ix_heartbeat_runs_session_id": "session_id",
    "ix_heartbeat_runs_state_reserved": "state, reserved_at",
}
MESSAGES_INDEXES = {
    "ix_messages_reply_to": "reply_to",
    "ix_messages_session_id": "session_id",
    "ix_messages_state_id": "state, id",
}
RUNS_FKS = {
    "fk_heartbeat_runs_job_id": "job_id) REFERENCES cron_jobs (id",
    "heartbeat_runs_heartbeat_id_fkey": "heartbeat_id) REFERENCES heartbeats (id",
    "heartbeat_runs_session_id_fkey": "session_id) REFERENCES sessions (id",
}
MESSAGES_FKS = {"messages_session_id_fkey": "session_id) REFERENCES sessions (id"}
# The columns that hold a run's, a message's or a delivery's id: 64-bit from here on.
LEDGER_IDS = {
    "heartbeat_runs": ("id",),
    "messages": ("id", "reply_to"),
    "deliveries": ("id", "run_id", "message_id"),
}
DELIVERIES_FKS = {
    "deliveries_run_id_fkey": "run_id) REFERENCES heartbeat_runs (id",
    "deliveries_message_id_fkey": "message_id) REFERENCES messages (id",
}


def upgrade() -> None:
    op.add_column("heartbeat_runs", sa.Column("fire_day", sa.Date(), nullable=True))
    if op.get_bind().dialect.name != "postgresql":
        _sqlite_fire_days()
        return
    op.execute(f"UPDATE heartbeat_runs SET fire_day = {FIRE_DAY}")
    for name in DELIVERIES_FKS:
        op.execute(f"ALTER TABLE deliveries DROP CONSTRAINT {name}")
    _id_type("deliveries", "bigint")
    _partition("heartbeat_runs", "fire_day")
    op.execute(
        "ALTER TABLE heartbeat_runs ADD CONSTRAINT ck_heartbeat_runs_fire_day"
        f" CHECK (fire_day = {FIRE_DAY})"
    )
    _move_rows("heartbeat_runs")
    _constraints("heartbeat_runs", "id, fire_day", RUNS_FKS, RUNS_INDEXES)
    op.execute(
        "ALTER TABLE heartbeat_runs ADD CONSTRAINT heartbeat_runs_fire_id_key"
        " UNIQUE (fire_id, fire_day)"
    )
    _partition("messages", "created_at")
    _move_rows("messages")
    _constraints("messages", "id, created_at", MESSAGES_FKS, MESSAGES_INDEXES)
    op.execute(
        "ALTER TABLE messages ADD CONSTRAINT uq_messages_session_key"
        " UNIQUE (session_id, idempotency_key, created_at)"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.drop_column("heartbeat_runs", "fire_day")
        return
    _unpartition("messages")
    _constraints("messages", "id", MESSAGES_FKS, MESSAGES_INDEXES)
    op.execute(
        "ALTER TABLE messages ADD CONSTRAINT uq_messages_session_key"
        " UNIQUE (session_id, idempotency_key)"
    )
    _unpartition("heartbeat_runs")
    op.execute("ALTER TABLE heartbeat_runs DROP CONSTRAINT ck_heartbeat_runs_fire_day")
    op.execute("ALTER TABLE heartbeat_runs DROP COLUMN fire_day")
    _constraints("heartbeat_runs", "id", RUNS_FKS, RUNS_INDEXES)
    op.execute(
        "ALTER TABLE heartbeat_runs ADD CONSTRAINT heartbeat_runs_fire_id_key UNIQUE (fire_id)"
    )
    _id_type("deliveries", "integer")
    for name, columns in DELIVERIES_FKS.items():
        op.execute(f"ALTER TABLE deliveries ADD CONSTRAINT {name} FOREIGN KEY ({columns})")


def _sqlite_fire_days() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, fire_id FROM heartbeat_runs")).all()
    for run_id, fid in rows:
        conn.execute(
            sa.text("UPDATE heartbeat_runs SET fire_day = :day WHERE id = :id"),
            {"day": fire_day(fid), "id": run_id},
        )


def _partition(table: str, key: str) -> None:
    """The partitioned ``table`` beside the old one (``<table>_unpartitioned``), with its
    partitions: history before today (if there are rows), today and the days ahead, default."""
    op.execute(f"ALTER TABLE {table} RENAME TO {table}_unpartitioned")
    op.execute(
        f"CREATE TABLE {table} (LIKE {table}_unpartitioned"
        f" INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE ({key})"
    )
    op.execute(f"ALTER TABLE {table} ALTER COLUMN {key} SET NOT NULL")
    _id_type(table, "bigint")  # still empty: no rewrite
    conn = op.get_bind()
    today = datetime.now(UTC).date()
    old = conn.scalar(
        sa.text(f"SELECT EXISTS (SELECT 1 FROM {table}_unpartitioned WHERE {key} < :d)"),
        {"d": today},
    )
    if old:
        op.execute(
            f"CREATE TABLE {table}_history PARTITION OF {table}"
            f" FOR VALUES FROM (MINVALUE) TO ('{today}')"
        )
    create_default(conn, table)
    for n in range(DAYS_AHEAD + 1):
        create_day(conn, table, today + timedelta(days=n))


def _move_rows(table: str) -> None:
    op.execute(f"INSERT INTO {table} SELECT * FROM {table}_unpartitioned")
    op.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
    op.execute(f"DROP TABLE {table}_unpartitioned")


def _unpartition(table: str) -> None:
    op.execute(f"ALTER TABLE {table} RENAME TO {table}_partitioned")
    op.execute(
        f"CREATE TABLE {table} (LIKE {table}_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    _id_type(table, "integer")  # still empty: no rewrite
    op.execute(f"INSERT INTO {table} SELECT * FROM {table}_partitioned")
    op.execute(f"ALTER SEQUENCE {table}_id_seq OWNED BY {table}.id")
    op.execute(f"DROP TABLE {table}_partitioned")


def _id_type(table: str, kind: str) -> None:
    """``table``'s id columns (``LEDGER_IDS``) and its id sequence as ``kind`` (bigint, or
    integer on the way down: a sequence past 32 bits refuses, and so the downgrade)."""
    columns = ", ".join(f"ALTER COLUMN {c} TYPE {kind}" for c in LEDGER_IDS[table])
    op.execute(f"ALTER TABLE {table} {columns}")
    op.execute(f"ALTER SEQUENCE {table}_id_seq AS {kind}")


def _constraints(table: str, key: str, fks: dict[str, str], indexes: dict[str, str]) -> None:
    """The primary key, foreign keys and indexes the old table had (LIKE copies none)."""
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({key})")
    for name, columns in fks.items():
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({columns})")
    for name, columns in indexes.items():
        op.execute(f"CREATE INDEX {name} ON {table} ({columns})")
