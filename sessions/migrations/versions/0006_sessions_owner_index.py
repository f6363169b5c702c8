"""An index on sessions (owner, status): the API's per-owner session quota counts by it

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

Every session the API creates first counts the owner's sessions that are not closed
(then ``count_open_sessions``; now ``check_session_room`` in sessions/store/owner_quotas.py, for
every path); without this index that count scans the whole table. Plain CREATE
INDEX, like 0004 (docs/operations.md, Upgrades, says how to build it beforehand, concurrently).
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # IF NOT EXISTS: an operator may have built it beforehand with CREATE INDEX CONCURRENTLY.
    op.create_index("ix_sessions_owner_status", "sessions", ["owner", "status"], if_not_exists=True)


def downgrade() -> None:
    op.drop_index("ix_sessions_owner_status", table_name="sessions")
