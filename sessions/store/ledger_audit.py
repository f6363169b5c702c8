"""What the invariant check reads of the ledger: runs, heartbeats and fences at one moment."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from hbgw.sessions.models import HeartbeatRow, RunRow, SessionRow
from hbgw.sessions.states import HeartbeatStatus, SessionStatus
from hbgw.sessions.store.run_views import RunView, run_view


@dataclass(frozen=True)
class HeartbeatSnapshot:
    """One heartbeat as the invariant check sees it; ``changed_at``: its row's or its session's
    last change, whichever is later."""

    heartbeat_id: int
    session_id: str
    status: HeartbeatStatus
    session_status: SessionStatus
    fire_count: int
    set_at: datetime
    changed_at: datetime
    # Counted runs of this configuration that retention deleted (I3 adds them back); not part
    # of a heartbeat's identity when I5 looks at it again (retention changes no schedule).
    retired_runs: int = field(default=0, compare=False)


@dataclass(frozen=True)
class LedgerSnapshot:
    """Runs, heartbeats and session fences read at one moment (one transaction, one snapshot),
    so that what the invariants compare is never half of a concurrent write."""

    runs: list[RunView]
    heartbeats: list[HeartbeatSnapshot]
    fences: dict[str, int]


def read_snapshot(db: Session) -> LedgerSnapshot:
    """Read inside a fresh transaction: nothing may have been read in it before."""
    if db.get_bind().dialect.name == "postgresql":
        # Read committed would give each SELECT its own snapshot; SQLite's BEGIN IMMEDIATE
        # already serialises this reader with every writer.
        db.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    runs = [run_view(r) for r in db.scalars(select(RunRow).order_by(RunRow.id))]
    rows = db.execute(
        select(HeartbeatRow, SessionRow)
        .join(SessionRow, SessionRow.id == HeartbeatRow.session_id)
        .order_by(HeartbeatRow.id)
    ).all()
    heartbeats = [
        HeartbeatSnapshot(
            h.id,
            h.session_id,
            h.status,
            s.status,
            h.fire_count,
            h.set_at,
            max(h.updated_at, s.updated_at),
            (h.retired_runs or 0) if h.retired_set_at == h.set_at else 0,
        )
        for h, s in rows
    ]
    fences = {sid: fence for sid, fence in db.execute(select(SessionRow.id, SessionRow.fence))}
    return LedgerSnapshot(runs, heartbeats, fences)
