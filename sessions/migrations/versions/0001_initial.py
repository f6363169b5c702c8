"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("platform", sa.String(length=64), nullable=False),
        sa.Column("chat", sa.String(length=255), nullable=False),
        sa.Column("thread", sa.String(length=255), nullable=True),
        sa.Column("owner", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("closed_reason", sa.String(length=32), nullable=True),
        sa.Column("parent_id", sa.String(length=64), nullable=True),
        sa.Column("conversation", sa.Integer(), nullable=False),
        sa.Column("fence", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["sessions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "heartbeats",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("schedule_text", sa.String(length=255), nullable=False),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("anchor_at", sa.DateTime(), nullable=False),
        sa.Column("set_at", sa.DateTime(), nullable=False),
        sa.Column("next_due_at", sa.DateTime(), nullable=True),
        sa.Column("fire_count", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("origin_chat", sa.String(length=255), nullable=False),
        sa.Column("origin_thread", sa.String(length=255), nullable=True),
        sa.Column("last_fired_at", sa.DateTime(), nullable=True),
        sa.Column("last_outcome", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id"),
    )
    with op.batch_alter_table("heartbeats", schema=None) as batch_op:
        batch_op.create_index(
            "ix_heartbeats_status_next_due", ["status", "next_due_at"], unique=False
        )

    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("conversation", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("fire_id", sa.String(length=160), nullable=True),
        sa.Column("reply_to", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_messages_session_id"), ["session_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_messages_reply_to"), ["reply_to"], unique=False)

    op.create_table(
        "heartbeat_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("fire_id", sa.String(length=160), nullable=False),
        sa.Column("heartbeat_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("fence", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("due_at", sa.DateTime(), nullable=True),
        sa.Column("reserved_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("prev_anchor_at", sa.DateTime(), nullable=False),
        sa.Column("prev_last_fired_at", sa.DateTime(), nullable=True),
        sa.Column("worker", sa.String(length=128), nullable=True),
        sa.Column("deferred", sa.Boolean(), nullable=False),
        sa.Column("missed", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["heartbeat_id"],
            ["heartbeats.id"],
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("fire_id"),
    )
    with op.batch_alter_table("heartbeat_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_heartbeat_runs_heartbeat_id"), ["heartbeat_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_heartbeat_runs_session_id"), ["session_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("heartbeat_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_heartbeat_runs_session_id"))
        batch_op.drop_index(batch_op.f("ix_heartbeat_runs_heartbeat_id"))

    op.drop_table("heartbeat_runs")
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_messages_reply_to"))
        batch_op.drop_index(batch_op.f("ix_messages_session_id"))

    op.drop_table("messages")
    with op.batch_alter_table("heartbeats", schema=None) as batch_op:
        batch_op.drop_index("ix_heartbeats_status_next_due")

    op.drop_table("heartbeats")
    op.drop_table("sessions")
