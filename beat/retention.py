"""Beat's retention step: keeps the ledger and the messages bounded (docs/design.md: Retention).

One replica at a time runs it, once per ``HBGW_RETAIN_INTERVAL``, under the retention lease
(``hbgw/state/retention_lease.py``). A step deletes at most ``HBGW_RETAIN_BATCHES`` batches of
``HBGW_RETAIN_BATCH`` rows of each table, every batch its own short transaction, so SQLite's
write lock is never held for long and the fire path's writers only wait a batch at most. A
step that left rows behind lets the next tick go on.

On PostgreSQL the step first creates the day partitions of today and the next ``DAYS_AHEAD``
days, and drops the partitions wholly past retention whose rows may all go (at most
``HBGW_RETAIN_BATCHES`` of each table a step); the bounded delete then trims what is left past
the cutoff (a partition holding a row to keep, the migration's history, the default partition).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from hbgw.core.clock import from_ms
from hbgw.core.metrics import gateway_metrics
from hbgw.core.settings import Settings
from hbgw.sessions.store import Housekeeping
from hbgw.sessions.store.partitions import DAYS_AHEAD
from hbgw.state.failures import log_failure
from hbgw.state.retention_lease import RetentionLease

log = logging.getLogger("hbgw.retention")

# Below a day, "tokens today" could lose runs of today: the settings refuse it, this guards.
MIN_KEEP = timedelta(days=1)


@dataclass(frozen=True)
class RetentionReport:
    ran: bool = False  # this replica held the lease
    runs: int = 0  # runs deleted (with their delivery records)
    messages: int = 0  # messages deleted (with theirs)
    more: bool = False  # a table still has rows past retention: the next tick goes on
    partitions: int = 0  # day partitions dropped (PostgreSQL); their rows count in runs, messages


class RetentionStep:
    def __init__(self, retention: Housekeeping, lease: RetentionLease, settings: Settings) -> None:
        self.retention = retention  # the one part of the store this step uses
        self.lease = lease
        self.settings = settings
        self.token = uuid.uuid4().hex

    def enabled(self) -> bool:
        return bool(self.settings.retain_runs_days or self.settings.retain_messages_days)

    def step(self, now_ms: int) -> RetentionReport:
        """Run a step if retention is on and this replica wins the lease; never raises."""
        if not self.enabled():
            return RetentionReport()
        try:
            interval_ms = int(self.settings.retain_interval * 1000)
            if not self.lease.acquire(self.token, interval_ms):
                return RetentionReport()
            report = self.run(from_ms(now_ms))
            if report.more:
                self.lease.shorten(self.token)
        except Exception as exc:  # a failed step is tried again one interval later
            log_failure(log, "retention step failed", exc, action="retention.failed")
            return RetentionReport()
        deleted = gateway_metrics().retention_deleted
        deleted.labels("runs").inc(report.runs)
        deleted.labels("messages").inc(report.messages)
        if report.runs or report.messages:
            log.info(
                "retention: deleted %d runs and %d messages",
                report.runs,
                report.messages,
                extra={"action": "retention.step"},
            )
        return report

    def run(self, now: datetime) -> RetentionReport:
        """One step at ``now`` without the lease (tests and tools call it directly)."""
        s, retention = self.settings, self.retention
        runs_cutoff, messages_cutoff = (
            _cutoff(now, s.retain_runs_days),
            _cutoff(now, s.retain_messages_days),
        )
        retention.add_partitions(now.date(), now.date() + timedelta(days=DAYS_AHEAD))
        dropped_runs = dropped_messages = None
        if runs_cutoff is not None:
            dropped_runs = retention.drop_runs_partitions(runs_cutoff, s.retain_batches)
        if messages_cutoff is not None:
            dropped_messages = retention.drop_messages_partitions(messages_cutoff, s.retain_batches)
        runs, more_runs = self._batches(retention.retire_runs, runs_cutoff)
        messages, more_messages = self._batches(retention.retire_messages, messages_cutoff)
        partitions = sum(d.partitions for d in (dropped_runs, dropped_messages) if d)
        return RetentionReport(
            True,
            runs + (dropped_runs.rows if dropped_runs else 0),
            messages + (dropped_messages.rows if dropped_messages else 0),
            more_runs or more_messages,
            partitions,
        )

    def _batches(
        self, retire: Callable[[datetime, int], int], before: datetime | None
    ) -> tuple[int, bool]:
        """Batches until one comes back short (none left) or the step's budget is spent."""
        if before is None:
            return 0, False
        s = self.settings
        deleted = 0
        for _ in range(s.retain_batches):
            n = retire(before, s.retain_batch)
            deleted += n
            if n < s.retain_batch:
                return deleted, False
        return deleted, True


def _cutoff(now: datetime, days: int) -> datetime | None:
    """Rows older than this go; None: kept forever."""
    if days <= 0:
        return None
    return now - max(timedelta(days=days), MIN_KEEP)
