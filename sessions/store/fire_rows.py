"""The fire path's steps on Core rows (``ledger_sql``'s statements), each inside a caller's
transaction: no ORM object is loaded or flushed on the way of a fire that goes as planned. The
rare ways (older turns to settle, a refund, compression to follow) keep the ORM steps of
``ledger_steps.py``; a Core row has the column names of its ORM row, so the views and
``heartbeat_state`` read either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, CursorResult, Row
from sqlalchemy.orm import Session

from hbgw.core.errors import InvalidState, NotFound, StaleFence
from hbgw.core.usage import TokenUsage
from hbgw.sessions import heartbeat as hb
from hbgw.sessions.models import MODEL_CHARS
from hbgw.sessions.states import (
    IN_TURN,
    MessageState,
    RunState,
    SessionStatus,
    fire_day,
)
from hbgw.sessions.store import ledger_sql as sql
from hbgw.sessions.store.deliveries import (
    DeliveryOutcome,
    Outbound,
    Owner,
    insert_suppressed_in,
    record_outcome_in,
)
from hbgw.sessions.store.heartbeat_records import state_values
from hbgw.sessions.store.ledger_steps import admit, settle_older_turns_in
from hbgw.sessions.store.message_records import MessageView, message_view
from hbgw.sessions.store.run_views import (
    Duplicate,
    Refused,
    RunKey,
    RunView,
    run_view,
)

# The view's fields that are the run's own columns (``delivery`` is read with the lists only).
_RUN_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(RunView) if f.name in sql.RUNS.c)


def on(db: Session, *, writes: bool) -> Connection:
    """The transaction's connection, for Core statements; ``writes``: the step changes rows, so
    a COMMIT cut off afterwards is ambiguous (``base._CommitCut``), as an ORM flush notes."""
    if writes:
        db.info["wrote"] = True
    return db.connection()


def run_with_fence(conn: Connection, run_key: RunKey, fence: int) -> Row[Any]:
    """``RUN_WITH_FENCE``, checked: NotFound, or StaleFence when ``fence`` is not the session's
    newest (a turn that lost its lock writes nothing)."""
    row = conn.execute(sql.RUN_WITH_FENCE, key_params(run_key)).first()
    if row is None:
        raise NotFound(f"There is no run {run_key.id}.")
    if row.session_fence != fence:
        raise StaleFence(
            f"Session {row.session_id} is now fenced at {row.session_fence}; a write with fence "
            f"{fence} comes from a turn that lost its lock and is rejected."
        )
    return row


def key_params(run_key: RunKey) -> dict[str, Any]:
    """The parameters that find one run (``ledger_sql``: its id and its partition's day)."""
    return {"p_run_id": run_key.id, "p_fire_day": run_key.fire_day}


def run_view_of(row: Row[Any], **changed: Any) -> RunView:
    """The run as a view from a Core row (its columns carry the view's names)."""
    mapping = row._mapping
    return RunView(**{name: changed.get(name, mapping[name]) for name in _RUN_VIEW_FIELDS})


def claim(db: Session, session_id: str, fence: int, now: datetime) -> tuple[Row[Any], int]:
    """``claim_fence``'s work inside a caller's transaction: the session's row (locked, as it
    was before the claim) and how many deliveries of older turns it found cut off."""
    conn = on(db, writes=True)
    session = conn.execute(sql.SESSION_FOR_UPDATE, {"p_session_id": session_id}).first()
    if session is None:
        raise NotFound(
            f"There is no session {session_id!r} — `hbgw session create` makes one and "
            "prints its id."
        )
    if fence <= session.fence:
        raise StaleFence(
            f"Fence {fence} of session {session_id} is not newer than {session.fence}."
        )
    older = conn.execute(sql.OLDER_RUNS, {"p_session_id": session_id, "p_fence": fence}).first()
    unknown = settle_older_turns_in(db, session_id, fence, now) if older is not None else 0
    conn.execute(sql.CLAIM_FENCE, {"p_session_id": session_id, "p_fence": fence, "p_now": now})
    return session, unknown


def heartbeat_of(conn: Connection, session_id: str) -> Row[Any] | None:
    return conn.execute(sql.HEARTBEAT_OF_SESSION, {"p_session_id": session_id}).first()


def reserving(
    conn: Connection, session: Row[Any], fire_id: str, row: Row[Any] | None, now: datetime
) -> hb.HeartbeatState | Duplicate | Refused:
    """After ``claim``, in the same transaction: the duplicate (the ledger has the fire id), the
    refusal (no heartbeat, paused, not due), or the state the fire reserves from."""
    existing = run_of_fire(conn, fire_id)
    if existing is not None:
        return Duplicate(run_view(existing))
    return admit(session, row, now)


def run_of_fire(conn: Connection, fire_id: str) -> Row[Any] | None:
    """The ledger's run of ``fire_id``, if any (in the one day partition its id names)."""
    found = {"p_fire_id": fire_id, "p_fire_day": fire_day(fire_id)}
    return conn.execute(sql.RUN_BY_FIRE_ID, found).first()


def own_run_after_cut(
    conn: Connection, session_id: str, fence: int, fire_id: str
) -> Row[Any] | None:
    """A begin repeated after its own COMMIT was cut off: the fire's run as that COMMIT stored
    it for this grant (its session, its fence); None when it is absent or another grant's.
    StaleFence when a newer grant has claimed the session since."""
    found = run_of_fire(conn, fire_id)
    if found is None or found.session_id != session_id or found.fence != fence:
        return None
    return run_with_fence(conn, RunKey(found.id, found.fire_day), fence)


def insert_run(conn: Connection, values: dict[str, Any], **changed: Any) -> RunView:
    """One ledger row (``reservations.reserved_values``, with ``changed``); its id from the
    INSERT."""
    values = values | changed
    return _new_run_view(_new_id(conn.execute(sql.INSERT_RUN, values)), values)


def write_state(
    conn: Connection, heartbeat_id: int, state: hb.HeartbeatState, now: datetime, **more: Any
) -> None:
    """The heartbeat's ``state`` (and ``more`` columns) written in one UPDATE."""
    values = state_values(state, now) | more
    conn.execute(sql.UPDATE_HEARTBEAT, {"p_heartbeat_id": heartbeat_id, **values})


def _new_run_view(run_id: int, values: dict[str, Any]) -> RunView:
    fields: dict[str, Any] = {name: values.get(name) for name in _RUN_VIEW_FIELDS}
    return RunView(**fields | {"id": run_id})


def _new_id(result: CursorResult[Any]) -> int:
    """The id an INSERT of one row gave it (RETURNING on PostgreSQL, lastrowid on SQLite)."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def finish(
    conn: Connection,
    run: Row[Any],
    final: RunState,
    now: datetime,
    detail: str | None,
    usage: TokenUsage | None,
) -> RunView:
    """The run row's own end, in one UPDATE (the caller settles its heartbeat): only a started
    run finishes."""
    if run.state not in IN_TURN:
        raise InvalidState(f"Run {run.fire_id} is {run.state}; only a started run finishes.")
    spent = {
        "prompt_tokens": usage.prompt_tokens if usage else run.prompt_tokens,
        "completion_tokens": usage.completion_tokens if usage else run.completion_tokens,
        "model": usage.model[:MODEL_CHARS] if usage else run.model,
    }
    params = {f"p_{name}": value for name, value in spent.items()}
    key = {"p_run_id": run.id, "p_fire_day": run.fire_day}
    conn.execute(
        sql.FINISH_RUN, {**key, "p_state": final, "p_now": now, "p_detail": detail, **params}
    )
    return run_view_of(run, state=final, finished_at=now, detail=detail, **spent)


def add_message(
    db: Session,
    session_id: str,
    conversation: int,
    fire_id: str,
    role: str,
    kind: str,
    text: str,
    now: datetime,
) -> MessageView:
    """A turn's prompt or reply stored as a message (done), in one INSERT."""
    values: dict[str, Any] = dict(
        session_id=session_id,
        conversation=conversation,
        role=role,
        kind=kind,
        text=text,
        fire_id=fire_id,
        reply_to=None,
        state=MessageState.DONE,
        created_at=now,
    )
    message_id = _new_id(on(db, writes=True).execute(sql.INSERT_MESSAGE, values))
    return MessageView(id=message_id, **values)


def prompt_of(db: Session, fire_id: str, started_at: datetime | None) -> MessageView:
    """The prompt a started run stored: created with the start, so at its ``started_at``."""
    params = {"p_fire_id": fire_id, "p_created_at": started_at}
    row = on(db, writes=False).execute(sql.PROMPT_OF_FIRE, params).first()
    assert row is not None  # stored in the transaction that started the run
    return message_view(row)


def history_before(db: Session, message: MessageView, limit: int) -> list[MessageView]:
    params = {"p_session_id": message.session_id, "p_before": message.id, "p_limit": limit}
    rows = on(db, writes=False).execute(sql.HISTORY_BEFORE, params).all()
    return [message_view(r) for r in reversed(rows)]


def record_delivery(
    db: Session, run: Any, fence: int, channel: str, delivered: DeliveryOutcome, now: datetime
) -> None:
    """The finish's delivery record: the pending one's outcome, or (never marked: nothing was
    to be sent) a suppressed one. ``run``: an ORM row or a Core row."""
    if run.state == RunState.DELIVERING:
        record_outcome_in(db, fence, delivered, now)
    else:
        owner = Owner(run.session_id, fence, channel, run_id=run.id)
        insert_suppressed_in(db, owner, Outbound(delivered.key, "heartbeat"), now)


def index_due(status: SessionStatus, state: hb.HeartbeatState | None) -> datetime | None:
    """The due time the index should hold for a session (None: no entry)."""
    if state is None or status != SessionStatus.ACTIVE:
        return None
    return state.next_due()


def by_key(rows: Sequence[Row[Any]], key: str) -> dict[Any, Row[Any]]:
    return {row._mapping[key]: row for row in rows}
