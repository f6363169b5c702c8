"""stored_secrets: secrets a deployment makes for itself, one row each

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05

The first holds the key of the public message and run ids when HBGW_API_ID_KEY is unset: made
at random by the first process that needs it (``INSERT … ON CONFLICT DO NOTHING``, then read
back, so replicas racing to make it all read the one that won) and read by every replica. It
replaces a key derived from the database URL, which anyone who knew a password-less URL could
compute. The table starts empty: a deployment upgrading without HBGW_API_ID_KEY gets new public
ids once (docs/operations.md, "Upgrades").
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stored_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("stored_secrets")
