"""The fire path's hot SQL as named SQLAlchemy Core statements, each with why it exists
(procrastinate's ``sql/queries.sql`` is the model): no ORM unit of work, identity map or flush
on these steps, only the statement and its parameters. Run them on the transaction's own
connection (``on``), which also notes the write for the store's cut-off-COMMIT rule.

Parameters are named ``p_*`` so that none collides with a column's own bind name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from sqlalchemy import Connection, Row, Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from core.errors import NotFound, StaleFence
from sessions.models import DeliveryRow, RunRow, SessionRow
from sessions.states import RunState
from sessions.store.run_views import RunView

RUNS = cast(Table, RunRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)
DELIVERIES = cast(Table, DeliveryRow.__table__)

# A fenced step on a run reads the run and its session's newest fence in one statement, both
# rows locked (PostgreSQL; SQLite's BEGIN IMMEDIATE holds the whole file): the fence check and
# the run's state are then true until COMMIT.
RUN_WITH_FENCE = (
    select(RUNS, SESSIONS.c.fence.label("session_fence"))
    .join(SESSIONS, SESSIONS.c.id == RUNS.c.session_id)
    .where(RUNS.c.id == bindparam("p_run_id"))
    .with_for_update()
)

# The durable mark before a heartbeat's one send: only a started run becomes delivering.
MARK_DELIVERING = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("p_run_id"), RUNS.c.state == RunState.STARTED)
    .values(state=RunState.DELIVERING)
)

# A delivery record written with the step that owns it (pending with the mark, suppressed with
# a silent finish): one INSERT, no read — a run marks delivering once.
INSERT_DELIVERY = insert(DELIVERIES)

# The view's fields that are the run's own columns (``delivery`` is read with the lists only).
_RUN_VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(RunView) if f.name in RUNS.c)


def on(db: Session, *, writes: bool) -> Connection:
    """The transaction's connection, for Core statements; ``writes``: the step changes rows, so
    a COMMIT cut off afterwards is ambiguous (``base._CommitCut``), as an ORM flush notes."""
    if writes:
        db.info["wrote"] = True
    return db.connection()


def run_with_fence(conn: Connection, run_id: int, fence: int) -> Row[Any]:
    """``RUN_WITH_FENCE``, checked: NotFound, or StaleFence when ``fence`` is not the session's
    newest (a turn that lost its lock writes nothing)."""
    row = conn.execute(RUN_WITH_FENCE, {"p_run_id": run_id}).first()
    if row is None:
        raise NotFound(f"There is no run {run_id}.")
    if row.session_fence != fence:
        raise StaleFence(
            f"Session {row.session_id} is now fenced at {row.session_fence}; a write with fence "
            f"{fence} comes from a turn that lost its lock and is rejected."
        )
    return row


def run_view_of(row: Row[Any], **changed: Any) -> RunView:
    """The run as a view from a Core row (its columns carry the view's names)."""
    mapping = row._mapping
    return RunView(**{name: changed.get(name, mapping[name]) for name in _RUN_VIEW_FIELDS})
