"""Write, then settle: the one rule that makes the due index agree with SQL after a change.

SQL is the truth (rule 11): a unit that changed a heartbeat or a cron job in SQL, or just read
the due time SQL answered, hands it to this unit, which writes the index. It holds the three
store parts it reads and the index it writes, nothing else: no gate, no lock, no settings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from hbgw.core.clock import to_ms
from hbgw.core.errors import NotFound
from hbgw.sessions.states import SessionStatus, job_member
from hbgw.sessions.store import Heartbeats, Jobs, SessionRecords
from hbgw.state.due_index import DueIndex
from hbgw.state.failures import log_failure

# The runtime's logger, as before this unit was split out of it: alerts and dashboards key
# on its name with the action.
log = logging.getLogger("hbgw.runtime")


@dataclass(frozen=True)
class DueSettle:
    heartbeats: Heartbeats
    sessions: SessionRecords
    jobs: Jobs
    index: DueIndex

    def settle(self, session_id: str) -> int | None:
        """Make the due index agree with SQL for one session; returns the due time written."""
        try:
            state = self.heartbeats.get_heartbeat(session_id)
            session = self.sessions.get_session(session_id)
        except NotFound:
            self.index.remove(session_id)
            return None
        except Exception as exc:
            # Rule 11: only a definite answer prunes; a failing read keeps the entry for later.
            log_failure(
                log,
                "settle kept the due entry: the store could not be read",
                exc,
                action="index.settle_failed",
                session=session_id,
            )
            return None
        due = state.next_due() if state and session.status == SessionStatus.ACTIVE else None
        return self.apply(session_id, due)

    def settle_job(self, job_id: str) -> int | None:
        """Make the due index agree with SQL for one cron job (its member ``job:<id>``)."""
        member = job_member(job_id)
        try:
            job = self.jobs.job(job_id)
        except NotFound:
            self.index.remove(member)
            return None
        return self.apply(member, job.next_due)

    def apply(self, member: str, due: datetime | None) -> int | None:
        """Write a due time SQL just answered (None: no entry), without reading it again."""
        if due is None:
            self.index.remove(member)
            return None
        self.index.schedule(member, to_ms(due))
        return to_ms(due)
