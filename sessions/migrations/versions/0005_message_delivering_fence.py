"""messages.delivering_fence: the grant that was about to send a user message's reply

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

Set just before a user turn sends its reply (``begin_reply``). A later grant that finds an
older fence there, and no reply, knows that turn's outcome is unknown, and marks its own reply
as a possible repeat. Nullable: messages written before this revision were never marked.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delivering_fence", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("delivering_fence")
