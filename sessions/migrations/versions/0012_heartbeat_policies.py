"""heartbeat policies: active hours, exact (no jitter), an end (ends_at, max_fires)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06

Nullable columns: a heartbeat set before this revision has no policy (NULL everywhere, and NULL
``exact`` means jittered like every new heartbeat), and the ALTERs are instant on PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = ("active_hours", "exact", "ends_at", "max_fires")


# Plain ALTER TABLE on both backends, as 0009: a batch copy would trip the foreign keys.
def upgrade() -> None:
    op.add_column("heartbeats", sa.Column("active_hours", sa.String(96), nullable=True))
    op.add_column("heartbeats", sa.Column("exact", sa.Boolean(), nullable=True))
    op.add_column("heartbeats", sa.Column("ends_at", sa.DateTime(), nullable=True))
    op.add_column("heartbeats", sa.Column("max_fires", sa.Integer(), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.drop_column("heartbeats", column)
