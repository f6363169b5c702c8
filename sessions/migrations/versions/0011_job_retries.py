"""cron_jobs.retries and retry_at: the retry ladder of a run whose model was unreachable

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

``retry_at`` is when the job's run is tried again (its next due time while set); ``retries``
counts the attempts of the ladder so far. Existing jobs have none: 0 and NULL.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both backends, as 0009: no batch copy of a table others point at.
def upgrade() -> None:
    op.add_column(
        "cron_jobs", sa.Column("retries", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("cron_jobs", sa.Column("retry_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("cron_jobs", "retry_at")
    op.drop_column("cron_jobs", "retries")
