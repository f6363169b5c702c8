"""deliveries: one record per outbound message, pending → sent | failed | suppressed | unknown

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Written inside the turn's own transactions: the pending record with the fenced mark just before
the send (``mark_delivering``, ``begin_reply``), its outcome with the finish (``finish_fire``,
the reply's ``add_message``). A pending record whose turn was cut off becomes ``unknown``. A new
table: rows written before this revision have none (their runs show no delivery).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("heartbeat_runs.id"), nullable=True),
        sa.Column("message_id", sa.Integer(), sa.ForeignKey("messages.id"), nullable=True),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("delivery_key", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("fence", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("platform_message_id", sa.String(255), nullable=True),
        sa.Column("error", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("delivery_key", name="uq_deliveries_delivery_key"),
        sa.CheckConstraint(
            "(run_id IS NULL) <> (message_id IS NULL)", name="ck_deliveries_run_or_message"
        ),
    )
    op.create_index("ix_deliveries_run_id", "deliveries", ["run_id"])
    op.create_index("ix_deliveries_message_id", "deliveries", ["message_id"])
    op.create_index("ix_deliveries_session_id", "deliveries", ["session_id"])
    op.create_index("ix_deliveries_state_updated", "deliveries", ["state", "updated_at"])


def downgrade() -> None:
    op.drop_table("deliveries")
