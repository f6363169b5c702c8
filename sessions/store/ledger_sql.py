"""The fire path's hot SQL as named SQLAlchemy Core statements, each with why it exists
(procrastinate's ``sql/queries.sql`` is the model): no ORM unit of work, identity map or flush
on these steps, only the statement and its parameters. Each is built once, here, with bound
parameters only, so SQLAlchemy compiles it once per dialect and reuses it from its cache.
``fire_rows.py`` runs them on the transaction's own connection.

Parameters are named ``p_*`` so that none collides with a column's own bind name; a statement
without ``values()`` (the INSERTs, ``UPDATE_HEARTBEAT``) takes its columns from the parameters.

PostgreSQL partitions the runs by ``fire_day`` and the messages by ``created_at`` (one
partition a day, migration 0017): every statement that finds a run by its id or its fire id
names its fire day too (``p_fire_day``, ``RunKey``), and one that finds a message names its
``created_at``, so the planner reads one partition, not every day's index
(``tests/integration/test_partition_pruning.py`` checks each with EXPLAIN).
"""

from __future__ import annotations

from sqlalchemy import Table, bindparam, insert, select, update

from hbgw.sessions.models import DeliveryRow, HeartbeatRow, MessageRow, RunRow, SessionRow
from hbgw.sessions.states import IN_TURN, DeliveryState, RunState

RUNS: Table = RunRow.__table__  # type: ignore[assignment]
SESSIONS: Table = SessionRow.__table__  # type: ignore[assignment]
DELIVERIES: Table = DeliveryRow.__table__  # type: ignore[assignment]
HEARTBEATS: Table = HeartbeatRow.__table__  # type: ignore[assignment]
MESSAGES: Table = MessageRow.__table__  # type: ignore[assignment]

# A fenced step on a run reads the run and what it needs of its session (the newest fence, and
# for the finish and a repeated begin its status and conversation) in one statement, both rows
# locked (PostgreSQL; SQLite's BEGIN IMMEDIATE holds the whole file): true until COMMIT.
RUN_WITH_FENCE = (
    select(
        RUNS,
        SESSIONS.c.fence.label("session_fence"),
        SESSIONS.c.status.label("session_status"),
        SESSIONS.c.closed_reason.label("session_closed_reason"),
        SESSIONS.c.conversation.label("session_conversation"),
    )
    .join(SESSIONS, SESSIONS.c.id == RUNS.c.session_id)
    .where(RUNS.c.id == bindparam("p_run_id"), RUNS.c.fire_day == bindparam("p_fire_day"))
    .with_for_update()
)

# A grant's claim locks its session first: every fenced write of the session queues behind it.
SESSION_FOR_UPDATE = (
    select(SESSIONS).where(SESSIONS.c.id == bindparam("p_session_id")).with_for_update()
)

# Admission reads a batch's sessions in one statement (an expanding IN, one cache entry).
SESSIONS_BY_ID = select(SESSIONS).where(SESSIONS.c.id.in_(bindparam("p_ids", expanding=True)))

# Runs older grants left unfinished (reserved, or in their turn): the claim settles them; the
# common answer is none, so only their ids are read.
OLDER_RUNS = select(RUNS.c.id).where(
    RUNS.c.session_id == bindparam("p_session_id"),
    RUNS.c.state.in_(sorted([RunState.RESERVED, *IN_TURN])),
    RUNS.c.fence < bindparam("p_fence"),
)

# The claim's fence write: from here on only this grant's writes pass the fence checks.
CLAIM_FENCE = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("p_session_id"))
    .values(fence=bindparam("p_fence"), updated_at=bindparam("p_now"))
)

# A fire id is UNIQUE in the ledger: finding its run is finding a duplicate delivery. Its day
# is a function of it (``states.fire_day``), so naming both finds the same run in one partition.
RUN_BY_FIRE_ID = select(RUNS).where(
    RUNS.c.fire_id == bindparam("p_fire_id"), RUNS.c.fire_day == bindparam("p_fire_day")
)

# Admission looks a batch's fire ids up in one statement (a tick's fires: one day, or two).
RUNS_BY_FIRE_ID = select(RUNS).where(
    RUNS.c.fire_id.in_(bindparam("p_ids", expanding=True)),
    RUNS.c.fire_day.in_(bindparam("p_days", expanding=True)),
)

# A session's one heartbeat (UNIQUE session_id), for the begin and the finish.
HEARTBEAT_OF_SESSION = select(HEARTBEATS).where(
    HEARTBEATS.c.session_id == bindparam("p_session_id")
)

# Admission reads a batch's heartbeats in one statement.
HEARTBEATS_OF_SESSIONS = select(HEARTBEATS).where(
    HEARTBEATS.c.session_id.in_(bindparam("p_ids", expanding=True))
)

# The finish reads the run's own heartbeat (by id): the session's may be a newer one.
HEARTBEAT_BY_ID = select(HEARTBEATS).where(HEARTBEATS.c.id == bindparam("p_heartbeat_id"))

# A heartbeat's state written whole (``heartbeat_records.state_values``) in one UPDATE.
UPDATE_HEARTBEAT = update(HEARTBEATS).where(HEARTBEATS.c.id == bindparam("p_heartbeat_id"))

# A fire's ledger row (``reservations.reserved_values``), written started, or refunded when the
# re-check refused it, in the transaction that reserves it; its id comes back with it.
INSERT_RUN = insert(RUNS)

# The finish: the run's outcome and what its turn spent, in one UPDATE.
FINISH_RUN = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("p_run_id"), RUNS.c.fire_day == bindparam("p_fire_day"))
    .values(
        state=bindparam("p_state"),
        finished_at=bindparam("p_now"),
        detail=bindparam("p_detail"),
        prompt_tokens=bindparam("p_prompt_tokens"),
        completion_tokens=bindparam("p_completion_tokens"),
        model=bindparam("p_model"),
    )
)

# The turn's prompt and its reply, stored as messages; the new id comes back with each.
INSERT_MESSAGE = insert(MESSAGES)

# A repeat of the start after a lost COMMIT finds the prompt it stored by its fire id, created
# with the run's start (the same ``now``: ``created_at`` is the run's ``started_at``).
PROMPT_OF_FIRE = (
    select(MESSAGES)
    .where(
        MESSAGES.c.fire_id == bindparam("p_fire_id"),
        MESSAGES.c.created_at == bindparam("p_created_at"),
        MESSAGES.c.role == "user",
    )
    .order_by(MESSAGES.c.id)
    .limit(1)
)

# The conversation the agent sees: the newest messages before the prompt (newest first). Not
# a lookup by id: they may lie in any day kept (and a skewed clock may have dated one after
# the prompt), so no day is named and PostgreSQL reads each day's session index.
HISTORY_BEFORE = (
    select(MESSAGES)
    .where(
        MESSAGES.c.session_id == bindparam("p_session_id"),
        MESSAGES.c.id < bindparam("p_before"),
    )
    .order_by(MESSAGES.c.id.desc())
    .limit(bindparam("p_limit"))
)

# The durable mark before a heartbeat's one send: only a started run becomes delivering.
MARK_DELIVERING = (
    update(RUNS)
    .where(
        RUNS.c.id == bindparam("p_run_id"),
        RUNS.c.fire_day == bindparam("p_fire_day"),
        RUNS.c.state == RunState.STARTED,
    )
    .values(state=RunState.DELIVERING)
)

# A delivery record written with the step that owns it (pending with the mark, suppressed with
# a silent finish): one INSERT, no read — a run marks delivering once.
INSERT_DELIVERY = insert(DELIVERIES)

# The outcome of a grant's send: one UPDATE of its pending record (none left when this is a
# repeat after a lost COMMIT, or a newer grant took the record over).
RECORD_OUTCOME = (
    update(DELIVERIES)
    .where(
        DELIVERIES.c.delivery_key == bindparam("p_key"),
        DELIVERIES.c.state == DeliveryState.PENDING,
        DELIVERIES.c.fence == bindparam("p_fence"),
    )
    .values(
        state=bindparam("p_state"),
        platform_message_id=bindparam("p_platform_message_id"),
        error=bindparam("p_error"),
        updated_at=bindparam("p_now"),
        text=bindparam("p_text"),
        chat=bindparam("p_chat"),
        thread=bindparam("p_thread"),
        reply_to=bindparam("p_reply_to"),
        next_attempt_at=bindparam("p_next_attempt_at"),
        maybe_sent=bindparam("p_maybe_sent"),
    )
)
