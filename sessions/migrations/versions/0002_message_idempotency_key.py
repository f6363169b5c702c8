"""messages.idempotency_key: a retried message is recognised, not stored twice; an index on
messages.state for the restore pass, which looks for queued messages

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-06

Nullable: rows written before this revision, replies and heartbeat turns have no key. Both
SQLite and PostgreSQL let any number of NULLs share a UNIQUE constraint.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idempotency_key", sa.String(length=255), nullable=True))
        batch_op.create_unique_constraint(
            "uq_messages_session_key", ["session_id", "idempotency_key"]
        )
        batch_op.create_index("ix_messages_state", ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_state")
        batch_op.drop_constraint("uq_messages_session_key", type_="unique")
        batch_op.drop_column("idempotency_key")
