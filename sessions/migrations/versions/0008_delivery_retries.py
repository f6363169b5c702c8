"""delivery retries and the pause reason: what a retried delivery sends again, and when; why a
heartbeat was paused for its route

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04

A delivery the platform failed for now (5xx, a timeout) is ``retrying``: the record keeps the
text and the address it goes to, when the next attempt is due and whether an earlier attempt
may have been posted (``maybe_sent``: the retry then carries the possible-repeat mark). A
heartbeat paused because its route refused a message for good keeps the sentence why
(``paused_reason``), cleared by resume. Nullable columns only, one index for beat's retry pass.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

DELIVERY_COLUMNS = ("text", "chat", "thread", "reply_to", "next_attempt_at", "maybe_sent")


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("text", sa.Text(), nullable=True))
        batch.add_column(sa.Column("chat", sa.String(255), nullable=True))
        batch.add_column(sa.Column("thread", sa.String(255), nullable=True))
        batch.add_column(sa.Column("reply_to", sa.String(64), nullable=True))
        batch.add_column(sa.Column("next_attempt_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("maybe_sent", sa.Boolean(), nullable=True))
    op.create_index("ix_deliveries_state_next", "deliveries", ["state", "next_attempt_at"])
    with op.batch_alter_table("heartbeats") as batch:
        batch.add_column(sa.Column("paused_reason", sa.String(500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("heartbeats") as batch:
        batch.drop_column("paused_reason")
    op.drop_index("ix_deliveries_state_next", table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        for name in DELIVERY_COLUMNS:
            batch.drop_column(name)
