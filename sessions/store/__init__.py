"""The typed store: every SQL statement of the project lives in ``sessions/``.

``Store`` is the one façade; each concern lives in its own module and each public method is
one transaction. Writes made by a running turn carry its fence: a write whose fence is not the
session's newest is rejected, so a worker that lost its lock cannot change anything after the
new owner has started.
"""

from __future__ import annotations

from hbgw.sessions.db import ensure_schema, make_engine
from hbgw.sessions.store.deliveries import DeliveryRecords
from hbgw.sessions.store.delivery_retries import DeliveryRetries
from hbgw.sessions.store.fire_turns import FireTurns
from hbgw.sessions.store.heartbeat_records import HeartbeatRecords
from hbgw.sessions.store.job_records import JobRecords
from hbgw.sessions.store.job_turns import JobTurns
from hbgw.sessions.store.ledger import FireLedger
from hbgw.sessions.store.message_records import MessageRecords
from hbgw.sessions.store.owner_budgets import OwnerBudgets
from hbgw.sessions.store.restore_reads import RestoreReads
from hbgw.sessions.store.retention import Retention
from hbgw.sessions.store.session_records import SessionRecords
from hbgw.sessions.store.webhook_routes import WebhookRoutes


class Store(
    SessionRecords,
    MessageRecords,
    HeartbeatRecords,
    FireLedger,
    FireTurns,
    RestoreReads,
    DeliveryRecords,
    DeliveryRetries,
    WebhookRoutes,
    JobRecords,
    JobTurns,
    OwnerBudgets,
    Retention,
):
    @classmethod
    def from_url(cls, url: str) -> Store:
        """Open a store; the embedded SQLite store migrates itself, others must be migrated."""
        engine = make_engine(url)
        ensure_schema(engine)
        return cls(engine)

    def close(self) -> None:
        self.engine.dispose()


__all__ = ["Store"]
