"""an owner's default token budget (owner_budgets) and where a heartbeat's budget came from

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-09

``heartbeats.budget_source`` is nullable, as 0012: a heartbeat set before this revision with a
budget counts it as its own (the operator's default was copied in; it cannot be told apart), one
without a budget follows its owner's default once the owner sets one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both backends, as 0009: a batch copy would trip the foreign keys.
def upgrade() -> None:
    op.add_column("heartbeats", sa.Column("budget_source", sa.String(16), nullable=True))
    op.create_table(
        "owner_budgets",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("daily_tokens", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("owner_budgets")
    op.drop_column("heartbeats", "budget_source")
