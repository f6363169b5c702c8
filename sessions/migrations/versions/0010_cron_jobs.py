"""cron jobs: the cron_jobs table; heartbeat_runs.job_id, and heartbeat_id nullable

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05

A job's runs share the ledger with heartbeats (the same UNIQUE fire id, reservation, refund and
delivery record): each run belongs to a heartbeat or to a job, never both nor neither. Rows
written before this revision are heartbeat runs and keep their heartbeat_id.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CHECK = "ck_heartbeat_runs_heartbeat_or_job"


def upgrade() -> None:
    op.create_table(
        "cron_jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("schedule_text", sa.String(255), nullable=False),
        sa.Column("run_at", sa.DateTime(), nullable=True),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("cron", sa.String(255), nullable=True),
        sa.Column("timezone", sa.String(64), nullable=True),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("sessions.id"), nullable=True),
        sa.Column("platform", sa.String(64), nullable=True),
        sa.Column("chat", sa.String(255), nullable=True),
        sa.Column("thread", sa.String(255), nullable=True),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("times", sa.Integer(), nullable=True),
        sa.Column("missed_policy", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("anchor_at", sa.DateTime(), nullable=False),
        sa.Column("next_due_at", sa.DateTime(), nullable=True),
        sa.Column("fire_count", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("last_fired_at", sa.DateTime(), nullable=True),
        sa.Column("last_outcome", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_cron_jobs_status_id", "cron_jobs", ["status", "id"])
    op.create_index("ix_cron_jobs_owner", "cron_jobs", ["owner"])
    with op.batch_alter_table("heartbeat_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_id", sa.String(32), nullable=True))
        batch_op.create_foreign_key("fk_heartbeat_runs_job_id", "cron_jobs", ["job_id"], ["id"])
        batch_op.create_index("ix_heartbeat_runs_job_id", ["job_id"])
        batch_op.alter_column("heartbeat_id", existing_type=sa.Integer(), nullable=True)
        batch_op.create_check_constraint(CHECK, "(heartbeat_id IS NULL) <> (job_id IS NULL)")


def downgrade() -> None:
    # Job runs have no heartbeat: they go with their jobs, so heartbeat_id can be NOT NULL again.
    op.execute(
        "DELETE FROM deliveries WHERE run_id IN "
        "(SELECT id FROM heartbeat_runs WHERE job_id IS NOT NULL)"
    )
    op.execute("DELETE FROM heartbeat_runs WHERE job_id IS NOT NULL")
    with op.batch_alter_table("heartbeat_runs", schema=None) as batch_op:
        batch_op.drop_constraint(CHECK, type_="check")
        batch_op.alter_column("heartbeat_id", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_index("ix_heartbeat_runs_job_id")
        batch_op.drop_constraint("fk_heartbeat_runs_job_id", type_="foreignkey")
        batch_op.drop_column("job_id")
    op.drop_index("ix_cron_jobs_owner", table_name="cron_jobs")
    op.drop_index("ix_cron_jobs_status_id", table_name="cron_jobs")
    op.drop_table("cron_jobs")
