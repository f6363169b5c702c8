"""Token usage: prompt_tokens, completion_tokens and model on heartbeat_runs (a heartbeat's turn)
and on messages (the reply of a user turn)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Nullable: rows written before this revision, and turns of agents that count no tokens (echo,
command), have no usage.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLES = ("heartbeat_runs", "messages")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("prompt_tokens", sa.Integer(), nullable=True))
            batch_op.add_column(sa.Column("completion_tokens", sa.Integer(), nullable=True))
            batch_op.add_column(sa.Column("model", sa.String(length=128), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("model")
            batch_op.drop_column("completion_tokens")
            batch_op.drop_column("prompt_tokens")
