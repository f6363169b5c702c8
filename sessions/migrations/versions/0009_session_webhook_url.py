"""sessions.webhook_url: where a webhook session's replies are POSTed

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

Set through the API (``PUT /v1/sessions/{id}/webhook``); NULL means HBGW_WEBHOOK_URL. A
nullable column: existing rows need no value, and the ALTER is instant on PostgreSQL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both backends (SQLite 3.35+ drops a column in place): a batch copy of
# ``sessions`` would trip the foreign keys every other table holds on it.
def upgrade() -> None:
    op.add_column("sessions", sa.Column("webhook_url", sa.String(length=2048), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "webhook_url")
