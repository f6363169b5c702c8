"""SQLAlchemy models: the durable truth. Only ``sessions/`` imports SQLAlchemy."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hbgw.core.webhook_url import WEBHOOK_URL_CHARS
from hbgw.sessions.states import (
    ClosedReason,
    DeliveryState,
    HeartbeatStatus,
    JobStatus,
    MessageState,
    MissedPolicy,
    RunState,
    SessionStatus,
)
from hbgw.sessions.validation import (
    ACTIVE_HOURS_CHARS,
    CHAT_CHARS,
    IDEMPOTENCY_KEY_CHARS,
    OWNER_CHARS,
    PLATFORM_CHARS,
    SCHEDULE_CHARS,
    THREAD_CHARS,
    TIMEZONE_CHARS,
)

# A model name as an endpoint reports it.
MODEL_CHARS = 128
# A delivery's error as kept (a platform's answer can be long; the start says why).
DELIVERY_ERROR_CHARS = 500
# A platform's message id (Slack's ts, Telegram's message_id, …) as text.
PLATFORM_MESSAGE_ID_CHARS = 255
PAUSED_REASON_CHARS = 500
# The ids of the tables that grow with every fire (runs, messages, deliveries) and the columns
# that hold them: 64-bit, as 288 million runs a day spend 32 bits in about a week. SQLite's
# INTEGER PRIMARY KEY is already 64-bit, and only that spelling keeps its rowid autoincrement.
LEDGER_ID = BigInteger().with_variant(Integer, "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Stores naive UTC, returns aware UTC: SQLite has no time zones, PostgreSQL shifts them."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)


E = TypeVar("E", bound=StrEnum)


class StateText(TypeDecorator[E]):
    """A state enum stored as its plain text: the schema keeps VARCHAR, the rows hold members."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: E | str | None, dialect: Dialect) -> str | None:
        # Coercing through the enum rejects a misspelt state before it reaches the table.
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> E | None:
        return None if value is None else self.enum(value)


class Base(DeclarativeBase):
    pass


class SessionRow(Base):
    """One conversation of an agent, bound to a chat (and thread) on a platform."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    platform: Mapped[str] = mapped_column(String(PLATFORM_CHARS))
    chat: Mapped[str] = mapped_column(String(CHAT_CHARS))
    thread: Mapped[str | None] = mapped_column(String(THREAD_CHARS))
    owner: Mapped[str | None] = mapped_column(String(OWNER_CHARS))
    status: Mapped[SessionStatus] = mapped_column(
        StateText(SessionStatus, 16), default=SessionStatus.ACTIVE
    )
    closed_reason: Mapped[ClosedReason | None] = mapped_column(StateText(ClosedReason, 32))
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.id"))
    # Bumped by reset: a fire admitted under an older conversation never runs.
    conversation: Mapped[int] = mapped_column(Integer, default=1)
    # Highest fence a turn of this session has claimed; fenced writes must carry exactly it.
    fence: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # Where a webhook session's messages are POSTed (None: HBGW_WEBHOOK_URL). Migration 0008.
    webhook_url: Mapped[str | None] = mapped_column(String(WEBHOOK_URL_CHARS))

    # The API's per-owner quota counts an owner's sessions that are not closed.
    __table_args__ = (Index("ix_sessions_owner_status", "owner", "status"),)


class MessageRow(Base):
    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(LEDGER_ID, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), index=True)
    conversation: Mapped[int] = mapped_column(Integer, default=1)
    # user | assistant | system
    role: Mapped[str] = mapped_column(String(16))
    # user | heartbeat | assistant | notice
    kind: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    fire_id: Mapped[str | None] = mapped_column(String(160))
    # The user message an assistant reply or notice answers.
    reply_to: Mapped[int | None] = mapped_column(LEDGER_ID, index=True)
    # A user message waits queued for a turn; replies and notices are born done.
    state: Mapped[MessageState] = mapped_column(
        StateText(MessageState, 16), default=MessageState.DONE
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The platform's message id, or the client's: a retry with the same key is the same message.
    idempotency_key: Mapped[str | None] = mapped_column(String(IDEMPOTENCY_KEY_CHARS))
    # What the agent spent on the turn this message answers (the reply of a user turn).
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(MODEL_CHARS))
    # The fence of the last grant that was about to send this user message's reply (set just
    # before the send): a newer grant that finds it, and no reply, may be sending a repeat.
    delivering_fence: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        UniqueConstraint("session_id", "idempotency_key", name="uq_messages_session_key"),
        # The restore pass pages through queued messages by id; they are few among many.
        Index("ix_messages_state_id", "state", "id"),
    )
    # As a run's: by id and ``created_at`` (the partition key), one partition per statement.
    __mapper_args__: Mapping[str, Any] = {"primary_key": (id, created_at)}


class HeartbeatRow(Base):
    """The one recurring instruction of a session. Moves to the child on compression."""

    __tablename__ = "heartbeats"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), unique=True)
    prompt: Mapped[str] = mapped_column(Text)
    schedule_text: Mapped[str] = mapped_column(String(SCHEDULE_CHARS), default="")
    interval_seconds: Mapped[int | None] = mapped_column(Integer)
    cron: Mapped[str | None] = mapped_column(String(SCHEDULE_CHARS))
    timezone: Mapped[str | None] = mapped_column(String(TIMEZONE_CHARS))
    status: Mapped[HeartbeatStatus] = mapped_column(StateText(HeartbeatStatus, 16))
    anchor_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # When it was last set: the fire count counts runs reserved since then.
    set_at: Mapped[datetime] = mapped_column(UTCDateTime())
    next_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    fire_count: Mapped[int] = mapped_column(Integer, default=0)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    origin_chat: Mapped[str] = mapped_column(String(CHAT_CHARS))
    origin_thread: Mapped[str | None] = mapped_column(String(THREAD_CHARS))
    last_fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_outcome: Mapped[str | None] = mapped_column(String(255))
    # Why it is paused when no person paused it (its route refused a delivery for good).
    paused_reason: Mapped[str | None] = mapped_column(String(PAUSED_REASON_CHARS))
    # Policies (docs/contract.md "Policies"); NULL: none. Active hours as ActiveHours.describe().
    active_hours: Mapped[str | None] = mapped_column(String(ACTIVE_HOURS_CHARS))
    exact: Mapped[bool | None] = mapped_column(Boolean)
    ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    max_fires: Mapped[int | None] = mapped_column(Integer)
    # Cost caps (migration 0013): tokens per UTC day, and the model its turns ask for.
    daily_tokens: Mapped[int | None] = mapped_column(BigInteger)
    model: Mapped[str | None] = mapped_column(String(MODEL_CHARS))
    # Where daily_tokens came from (0015, grammar.costs.BudgetSource): the heartbeat's own word,
    # its owner's default or the operator's; NULL: none, or set before 0015 (then its own).
    budget_source: Mapped[str | None] = mapped_column(String(16))
    # Dedupe (NULL: off) and backoff's ceiling, seconds; the quiet fires in a row; the digest
    # of the last reply delivered on its route (sessions/dedupe.py) and when.
    dedupe_seconds: Mapped[int | None] = mapped_column(Integer)
    backoff_seconds: Mapped[int | None] = mapped_column(Integer)
    quiet_fires: Mapped[int | None] = mapped_column(Integer)
    last_reply_hash: Mapped[str | None] = mapped_column(String(64))
    last_reply_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Counted runs (not refunded, reserved since set_at) that retention deleted, of the
    # configuration set at retired_set_at (migration 0016): invariant I3 adds them back.
    retired_runs: Mapped[int | None] = mapped_column(Integer)
    retired_set_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_heartbeats_status_next_due", "status", "next_due_at"),
        # The restore pass pages through active heartbeats by session id (keyset).
        Index("ix_heartbeats_status_session", "status", "session_id"),
    )


class OwnerBudgetRow(Base):
    """An owner's default token budget per UTC day (0015): the budget of each of the owner's
    heartbeats that names none of its own, in place of HBGW_HEARTBEAT_DAILY_TOKENS."""

    __tablename__ = "owner_budgets"

    owner: Mapped[str] = mapped_column(String(OWNER_CHARS), primary_key=True)
    daily_tokens: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class StoredSecretRow(Base):
    """A secret the deployment made for itself (0018): written once, by the first process that
    needs it, and read by every replica — the key of the public ids when HBGW_API_ID_KEY is
    unset (``store/stored_secrets.py``)."""

    __tablename__ = "stored_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class JobRow(Base):
    """A cron job: a standalone prompt on a schedule, any number per owner. Its runs go to a
    fresh session each (``platform``/``chat``/``thread``: where they are delivered) or to the
    existing ``session_id``, as turns under that session's lock."""

    __tablename__ = "cron_jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(OWNER_CHARS))
    prompt: Mapped[str] = mapped_column(Text)
    schedule_text: Mapped[str] = mapped_column(String(SCHEDULE_CHARS))
    # One of: run_at (a one-shot), interval_seconds, cron (+ timezone).
    run_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    interval_seconds: Mapped[int | None] = mapped_column(Integer)
    cron: Mapped[str | None] = mapped_column(String(SCHEDULE_CHARS))
    timezone: Mapped[str | None] = mapped_column(String(TIMEZONE_CHARS))
    session_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.id"))
    platform: Mapped[str | None] = mapped_column(String(PLATFORM_CHARS))
    chat: Mapped[str | None] = mapped_column(String(CHAT_CHARS))
    thread: Mapped[str | None] = mapped_column(String(THREAD_CHARS))
    model: Mapped[str | None] = mapped_column(String(MODEL_CHARS))
    times: Mapped[int | None] = mapped_column(Integer)
    missed_policy: Mapped[MissedPolicy] = mapped_column(StateText(MissedPolicy, 16))
    status: Mapped[JobStatus] = mapped_column(StateText(JobStatus, 16))
    anchor_at: Mapped[datetime] = mapped_column(UTCDateTime())
    next_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    fire_count: Mapped[int] = mapped_column(Integer, default=0)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    last_fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_outcome: Mapped[str | None] = mapped_column(String(255))
    # The retry ladder of a run whose model was unreachable: attempts so far, and the next.
    retries: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        # The restore pass pages through active jobs by id; the API lists an owner's.
        Index("ix_cron_jobs_status_id", "status", "id"),
        Index("ix_cron_jobs_owner", "owner"),
    )


class RunRow(Base):
    """The fire ledger: one row per accepted fire id, of a heartbeat or of a cron job."""

    __tablename__ = "heartbeat_runs"

    id: Mapped[int] = mapped_column(LEDGER_ID, primary_key=True, autoincrement=True)
    fire_id: Mapped[str] = mapped_column(String(160), unique=True)
    # The UTC day of the fire id's due time (``states.fire_day``, migration 0017): PostgreSQL
    # partitions the ledger by it, and its UNIQUE (fire_id, fire_day) is UNIQUE (fire_id).
    fire_day: Mapped[date] = mapped_column(Date)
    heartbeat_id: Mapped[int | None] = mapped_column(ForeignKey("heartbeats.id"), index=True)
    job_id: Mapped[str | None] = mapped_column(ForeignKey("cron_jobs.id"), index=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), index=True)
    generation: Mapped[int] = mapped_column(Integer)
    fence: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[RunState] = mapped_column(StateText(RunState, 16))
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    reserved_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # What a refund puts back.
    prev_anchor_at: Mapped[datetime] = mapped_column(UTCDateTime())
    prev_last_fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    worker: Mapped[str | None] = mapped_column(String(128))
    # True when the fire had to wait for the session to go idle.
    deferred: Mapped[bool] = mapped_column(default=False)
    # Due times coalesced into this fire besides its own.
    missed: Mapped[int] = mapped_column(Integer, default=0)
    detail: Mapped[str | None] = mapped_column(Text)
    # What the agent spent on this fire's turn (heartbeats cost money); NULL when nothing counted.
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(MODEL_CHARS))

    __table_args__ = (
        # Orphan recovery looks for old reservations: a handful among the whole ledger.
        Index("ix_heartbeat_runs_state_reserved", "state", "reserved_at"),
        CheckConstraint(
            "(heartbeat_id IS NULL) <> (job_id IS NULL)", name="ck_heartbeat_runs_heartbeat_or_job"
        ),
    )
    # The ORM finds and updates a run by its id and its day (PostgreSQL's partition key, the
    # second half of its primary key there), so each such statement reads one partition.
    __mapper_args__: Mapping[str, Any] = {"primary_key": (id, fire_day)}


class DeliveryRow(Base):
    """One outbound message: its delivery key (the same on every attempt), how its delivery
    stands, and the platform's answer. Belongs to a heartbeat run or to the user message whose
    turn sends it (its reply and notices), never both."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(LEDGER_ID, primary_key=True, autoincrement=True)
    run_id: Mapped[int | None] = mapped_column(
        LEDGER_ID, ForeignKey("heartbeat_runs.id"), index=True
    )
    message_id: Mapped[int | None] = mapped_column(LEDGER_ID, ForeignKey("messages.id"), index=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), index=True)
    channel: Mapped[str] = mapped_column(String(32))
    delivery_key: Mapped[str] = mapped_column(String(200))
    # reply | heartbeat | notice | failure (Channel.send's kind)
    kind: Mapped[str] = mapped_column(String(16))
    # The grant that last marked it pending: a pending record of an older grant was cut off.
    fence: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[DeliveryState] = mapped_column(StateText(DeliveryState, 16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    platform_message_id: Mapped[str | None] = mapped_column(String(PLATFORM_MESSAGE_ID_CHARS))
    error: Mapped[str | None] = mapped_column(String(DELIVERY_ERROR_CHARS))
    # A retrying delivery: the text and the address it is sent again to, when, and whether an
    # earlier attempt may have been posted (the retry is then marked a possible repeat).
    text: Mapped[str | None] = mapped_column(Text)
    chat: Mapped[str | None] = mapped_column(String(CHAT_CHARS))
    thread: Mapped[str | None] = mapped_column(String(THREAD_CHARS))
    reply_to: Mapped[str | None] = mapped_column(String(64))
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    maybe_sent: Mapped[bool | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        # One record per outbound message: every attempt at it counts on the same row.
        UniqueConstraint("delivery_key", name="uq_deliveries_delivery_key"),
        CheckConstraint(
            "(run_id IS NULL) <> (message_id IS NULL)", name="ck_deliveries_run_or_message"
        ),
        # Beat looks for pending records left behind: a handful among all deliveries.
        Index("ix_deliveries_state_updated", "state", "updated_at"),
        # Beat looks for retries that are due: a handful too.
        Index("ix_deliveries_state_next", "state", "next_attempt_at"),
    )
