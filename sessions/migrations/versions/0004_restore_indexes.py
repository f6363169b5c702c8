"""Indexes for the paged restore pass: active heartbeats by session id, queued messages by id,
and reservations by age (orphan recovery)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Each restore read is a bounded range of one of these, whatever the size of its table:
``ix_messages_state_id`` replaces ``ix_messages_state`` (its prefix), and orphan recovery no
longer scans the whole ledger for the few runs still ``reserved``. Plain CREATE INDEX: on a
large PostgreSQL table it blocks writes while it builds; docs/operations.md (Upgrades) says how
to build them beforehand, concurrently.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


INDEXES = (
    ("ix_heartbeats_status_session", "heartbeats", ["status", "session_id"]),
    ("ix_messages_state_id", "messages", ["state", "id"]),
    ("ix_heartbeat_runs_state_reserved", "heartbeat_runs", ["state", "reserved_at"]),
)


def upgrade() -> None:
    # IF NOT EXISTS: an operator may have built them beforehand with CREATE INDEX CONCURRENTLY.
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns, if_not_exists=True)
    op.drop_index("ix_messages_state", table_name="messages", if_exists=True)


def downgrade() -> None:
    op.drop_index("ix_heartbeat_runs_state_reserved", table_name="heartbeat_runs")
    op.create_index("ix_messages_state", "messages", ["state"])
    op.drop_index("ix_messages_state_id", table_name="messages")
    op.drop_index("ix_heartbeats_status_session", table_name="heartbeats")
