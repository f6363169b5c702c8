"""The typed store: every SQL statement of the project lives in ``sessions/``.

``Store`` is made of parts, one per concern, each an object over the one shared engine:

- ``store.sessions``: sessions and their lifecycle (``SessionRecords``);
- ``store.messages``: the inbox and the replies (``MessageRecords``);
- ``store.heartbeats``: heartbeat settings and owner budgets (``Heartbeats``);
- ``store.ledger``: the fire ledger and the heartbeat fire's turns (``Ledger``);
- ``store.restore``: the two reads of beat's restore pass (``RestoreReads``);
- ``store.deliveries``: delivery records and their retries (``Deliveries``);
- ``store.webhooks``: the webhook URL of a session (``WebhookRoutes``);
- ``store.jobs.jobs``: cron jobs and their turns (``Jobs``);
- ``store.retention``: retiring old rows and the day partitions (``Housekeeping``);
- ``store.secrets``: secrets the deployment made for itself (``StoredSecrets``).

A unit is handed the part it uses, not the whole store. Each public method of a part is one
transaction, declared with ``@transaction`` (``base``). Writes made by a running turn carry its
fence: a write whose fence is not the session's newest is rejected, so a worker that lost its
lock cannot change anything after the new owner has started.
"""

from __future__ import annotations

import functools
from typing import ClassVar

from sqlalchemy import Engine

from hbgw.sessions.db import ensure_schema, make_engine
from hbgw.sessions.quotas import OwnerQuotas
from hbgw.sessions.store.base import Database, Transactions
from hbgw.sessions.store.deliveries import DeliveryRecords
from hbgw.sessions.store.delivery_retries import DeliveryRetries
from hbgw.sessions.store.fire_turns import FireTurns
from hbgw.sessions.store.heartbeat_records import HeartbeatRecords
from hbgw.sessions.store.job_records import JobRecords
from hbgw.sessions.store.job_turns import JobTurns
from hbgw.sessions.store.ledger import FireLedger
from hbgw.sessions.store.message_records import MessageRecords
from hbgw.sessions.store.owner_budgets import OwnerBudgets
from hbgw.sessions.store.partitions import Partitions
from hbgw.sessions.store.restore_reads import RestoreReads
from hbgw.sessions.store.retention import Retention
from hbgw.sessions.store.session_records import SessionRecords
from hbgw.sessions.store.stored_secrets import StoredSecrets
from hbgw.sessions.store.webhook_routes import WebhookRoutes


class Heartbeats(HeartbeatRecords, OwnerBudgets):
    """A session's heartbeat settings, and the owner budgets that bound them."""


class Ledger(FireLedger, FireTurns):
    """The fire ledger: runs, their delivery marks, fences, and the heartbeat fire's steps."""


class Deliveries(DeliveryRecords, DeliveryRetries):
    """Delivery records of sent replies, their stale sweep and their retries."""


class Jobs(JobRecords, JobTurns):
    """Cron jobs: their records and the steps of their fires."""


class Housekeeping(Retention, Partitions):
    """Retiring old runs and messages, and the day partitions of the ledger."""


class Store:
    """The parts of one database; ``PARTS`` names them for the tests that walk every step."""

    PARTS: ClassVar[dict[str, type[Transactions]]] = {
        "sessions": SessionRecords,
        "messages": MessageRecords,
        "heartbeats": Heartbeats,
        "ledger": Ledger,
        "restore": RestoreReads,
        "deliveries": Deliveries,
        "webhooks": WebhookRoutes,
        "jobs": Jobs,
        "retention": Housekeeping,
        "secrets": StoredSecrets,
    }

    def __init__(self, engine: Engine, quotas: OwnerQuotas | None = None) -> None:
        self.engine = engine
        self.quotas = quotas or OwnerQuotas()
        database = Database(engine, self.quotas)
        self.sessions = SessionRecords(database)
        self.messages = MessageRecords(database)
        self.heartbeats = Heartbeats(database)
        self.ledger = Ledger(database)
        self.restore = RestoreReads(database)
        self.deliveries = Deliveries(database)
        self.webhooks = WebhookRoutes(database)
        self.jobs = Jobs(database)
        self.retention = Housekeeping(database)
        self.secrets = StoredSecrets(database)

    @classmethod
    def from_url(cls, url: str, quotas: OwnerQuotas | None = None) -> Store:
        """Open a store; the embedded SQLite store migrates itself, others must be migrated.
        ``quotas``: what each owner may hold (none: the operator's store)."""
        engine = make_engine(url)
        ensure_schema(engine)
        return cls(engine, quotas)

    @functools.cached_property
    def operator(self) -> Store:
        """The same database, its steps not held to owners' quotas: the operator's (the API's
        admin token). It shares this store's engine (and its pool)."""
        return Store(self.engine) if self.quotas.any else self

    def close(self) -> None:
        self.engine.dispose()


__all__ = [
    "Deliveries",
    "Heartbeats",
    "Housekeeping",
    "Jobs",
    "Ledger",
    "MessageRecords",
    "RestoreReads",
    "SessionRecords",
    "Store",
    "StoredSecrets",
    "WebhookRoutes",
]
