"""The plain values the store hands out, by name; each is defined beside its concern.

Nothing outside ``sessions/`` sees an ORM object, only these.
"""

from __future__ import annotations

from hbgw.sessions.store.deliveries import DeliveryOutcome, DeliveryView, Outbound, Resend
from hbgw.sessions.store.delivery_retries import RetryAttempt
from hbgw.sessions.store.fire_turns import (
    Finished,
    FireAdmission,
    FireBegin,
    FireStart,
    NotStarted,
    Started,
)
from hbgw.sessions.store.heartbeat_records import HeartbeatStatusView
from hbgw.sessions.store.job_records import JobRestoreEntry, JobRoute, JobView, NewJob
from hbgw.sessions.store.job_turns import (
    JobAdmission,
    JobBegin,
    JobFinished,
    JobNotStarted,
    JobStart,
    JobStarted,
)
from hbgw.sessions.store.ledger import (
    Duplicate,
    FenceClaim,
    RefusalReason,
    Refused,
    ReplyStart,
    Reserved,
    ReserveOutcome,
    RunKey,
    RunView,
)
from hbgw.sessions.store.ledger_audit import HeartbeatSnapshot, LedgerSnapshot
from hbgw.sessions.store.message_records import Accepted, MessageKey, MessageView
from hbgw.sessions.store.restore_reads import QueuedPage, RestorablePage, RestoreEntry
from hbgw.sessions.store.session_records import SessionView

__all__ = [
    "Accepted",
    "DeliveryOutcome",
    "DeliveryView",
    "Duplicate",
    "FenceClaim",
    "Finished",
    "FireAdmission",
    "FireBegin",
    "FireStart",
    "HeartbeatSnapshot",
    "HeartbeatStatusView",
    "JobAdmission",
    "JobBegin",
    "JobFinished",
    "JobNotStarted",
    "JobRestoreEntry",
    "JobRoute",
    "JobStart",
    "JobStarted",
    "JobView",
    "LedgerSnapshot",
    "MessageKey",
    "MessageView",
    "NewJob",
    "NotStarted",
    "Outbound",
    "QueuedPage",
    "RefusalReason",
    "Refused",
    "ReplyStart",
    "Resend",
    "ReserveOutcome",
    "Reserved",
    "RestorablePage",
    "RestoreEntry",
    "RetryAttempt",
    "RunKey",
    "RunView",
    "SessionView",
    "Started",
]
