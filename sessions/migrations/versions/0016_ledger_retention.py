"""ledger retention: what a heartbeat's deleted runs counted

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02

Retention deletes settled runs past ``HBGW_RETAIN_RUNS_DAYS``; invariant I3 (the fire count
equals the runs counted since the heartbeat was set) stays exact through ``retired_runs``: how
many counted runs of the configuration set at ``retired_set_at`` were deleted. A heartbeat set
again has a newer ``set_at``, so the old figure no longer applies and nothing has to reset it.
Nullable columns, as 0012 and 0014 (NULL: none retired): the ALTERs are instant on PostgreSQL
and existing rows are kept as they are.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both backends, as 0009: a batch copy would trip the foreign keys.
def upgrade() -> None:
    op.add_column("heartbeats", sa.Column("retired_runs", sa.Integer(), nullable=True))
    op.add_column("heartbeats", sa.Column("retired_set_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("heartbeats", "retired_set_at")
    op.drop_column("heartbeats", "retired_runs")
