"""A cron job's fire path's own SQL as named Core statements, beside the heartbeat's
(``ledger_sql.py``, whose run, session and message statements a job's run shares): the job's row,
read locked and written whole, in one statement each. ``job_rows.py`` runs them.
"""

from __future__ import annotations

from sqlalchemy import Table, bindparam, select, update

from hbgw.sessions.models import JobRow

JOBS: Table = JobRow.__table__  # type: ignore[assignment]

# The begin and the finish lock the job's row for their read-then-write, as every change of a
# job does (``job_records.py``): a pause, a resume or a cancel comes wholly before or after.
JOB_FOR_UPDATE = select(JOBS).where(JOBS.c.id == bindparam("p_job_id")).with_for_update()

# Admission reads a batch's jobs in one statement (an expanding IN, one cache entry).
JOBS_BY_ID = select(JOBS).where(JOBS.c.id.in_(bindparam("p_ids", expanding=True)))

# A job's state written whole (``job_records.job_state_values``), or only its last outcome, in
# one UPDATE; its columns come from the parameters.
UPDATE_JOB = update(JOBS).where(JOBS.c.id == bindparam("p_job_id"))
