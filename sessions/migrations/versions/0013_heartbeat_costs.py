"""heartbeat cost caps: a token budget per UTC day (daily_tokens) and a chosen model

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07

Nullable columns: a heartbeat set before this revision has no budget and the agent's own model.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

COLUMNS = ("daily_tokens", "model")


# Plain ALTER TABLE on both backends, as 0012: a batch copy would trip the foreign keys.
def upgrade() -> None:
    op.add_column("heartbeats", sa.Column("daily_tokens", sa.BigInteger(), nullable=True))
    op.add_column("heartbeats", sa.Column("model", sa.String(128), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.drop_column("heartbeats", column)
