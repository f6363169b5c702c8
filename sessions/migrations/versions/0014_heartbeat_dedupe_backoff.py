"""heartbeat policies: dedupe (window, the last delivered reply's digest and time) and backoff

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-08

Nullable columns, as 0012: a heartbeat set before this revision has no dedupe (NULL window) and
no backoff, and the ALTERs are instant on PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

COLUMNS = ("dedupe_seconds", "backoff_seconds", "quiet_fires", "last_reply_hash", "last_reply_at")


# Plain ALTER TABLE on both backends, as 0009: a batch copy would trip the foreign keys.
def upgrade() -> None:
    op.add_column("heartbeats", sa.Column("dedupe_seconds", sa.Integer(), nullable=True))
    op.add_column("heartbeats", sa.Column("backoff_seconds", sa.Integer(), nullable=True))
    op.add_column("heartbeats", sa.Column("quiet_fires", sa.Integer(), nullable=True))
    op.add_column("heartbeats", sa.Column("last_reply_hash", sa.String(64), nullable=True))
    op.add_column("heartbeats", sa.Column("last_reply_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.drop_column("heartbeats", column)
