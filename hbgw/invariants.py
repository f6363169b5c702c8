"""The invariants I1–I5 of docs/contract.md, computed from the ledger (and the index for I5).

I1 at most one turn per session at a time: fences strictly increase, run intervals never
   overlap (a run still in its turn lasts until now), and no run is left in its turn, or
   reserved, under a fence older than the one its session has granted since
I2 at most one run per fire id
I3 the fire count equals the runs since the heartbeat was set that were not refunded (those
   retention deleted counted on their heartbeat)
I4 no refunded (or abandoned) run has a start time
I5 every active heartbeat of an active session is in the index, running or pending, or changed
   less than one restore interval ago (the restore pass puts right what a racing writer left)

Exact at any moment, so it can be checked while traffic and faults go on: the SQL side is read
from one snapshot, and a heartbeat that looks missing from the index is looked at again in a
fresh snapshot before it counts (it may have changed after the first).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from hbgw.sessions.states import (
    GIVEN_BACK,
    IN_TURN,
    HeartbeatStatus,
    RunState,
    SessionStatus,
)
from hbgw.sessions.store import Ledger
from hbgw.sessions.views import HeartbeatSnapshot, LedgerSnapshot, RunView
from hbgw.state.due_index import DueIndex
from hbgw.state.turn_gate import TurnGate


@dataclass
class InvariantReport:
    violations: dict[str, list[str]] = field(default_factory=dict)
    duplicate_fires: int = 0
    overlapping_turns: int = 0

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "invariants_ok": self.ok,
            "duplicate_fires": self.duplicate_fires,
            "overlapping_turns": self.overlapping_turns,
            "violations": {k: v for k, v in self.violations.items() if v},
        }


def check(
    ledger: Ledger,
    gate: TurnGate,
    index: DueIndex,
    now: datetime,
    *,
    restore_interval: float,
    include_index: bool = True,
) -> InvariantReport:
    """I1–I4 from the ledger's snapshot; I5 (``include_index``) from the due index and the
    gate's locks and pending fires, with HBGW_RESTORE_INTERVAL (``restore_interval``, seconds)
    as the grace a heartbeat changed just now is given."""
    snapshot = ledger.audit_snapshot()
    report = audit(snapshot, now)
    if include_index:
        grace = timedelta(seconds=restore_interval)
        report.violations["I5"] = _unindexed(ledger, gate, index, snapshot, now - grace)
    return report


def audit(snapshot: LedgerSnapshot, now: datetime) -> InvariantReport:
    """I1–I4 of one snapshot of the ledger."""
    runs = snapshot.runs
    report = InvariantReport(violations={f"I{i}": [] for i in range(1, 6)})
    _turns(snapshot, now, report)
    counts = Counter(r.fire_id for r in runs)
    dups = [f for f, n in counts.items() if n > 1]
    report.duplicate_fires = len(dups)
    report.violations["I2"] += [f"fire {f} ran {counts[f]} times" for f in dups]
    report.violations["I3"] += _miscounted(snapshot)
    report.violations["I4"] += [
        f"{r.fire_id} is {r.state} but started"
        for r in runs
        if r.state in GIVEN_BACK and r.started_at is not None
    ]
    return report


def _miscounted(snapshot: LedgerSnapshot) -> list[str]:
    # A reservation counts at once and only a refund gives it back (rule 9): runs still
    # reserved, in their turn, finished, or abandoned to a newer configuration all count.
    by_heartbeat: dict[int, list[RunView]] = defaultdict(list)
    for run in snapshot.runs:
        if run.heartbeat_id is not None:  # a cron job's run counts on its job
            by_heartbeat[run.heartbeat_id].append(run)
    out = []
    for hb in snapshot.heartbeats:
        if hb.status == HeartbeatStatus.CLEARED:
            continue
        # Plus the counted runs retention deleted (sessions/store/retention.py).
        counted = hb.retired_runs + sum(
            1
            for r in by_heartbeat[hb.heartbeat_id]
            if r.state != RunState.REFUNDED and r.reserved_at >= hb.set_at
        )
        if counted != hb.fire_count:
            out.append(f"heartbeat of {hb.session_id}: count {hb.fire_count}, runs {counted}")
    return out


def _turns(snapshot: LedgerSnapshot, now: datetime, report: InvariantReport) -> None:
    per_session: dict[str, list[RunView]] = defaultdict(list)
    for run in snapshot.runs:
        per_session[run.session_id].append(run)
    for sid, runs in per_session.items():
        for before, after in pairwise(runs):  # in reservation order (ids)
            if after.fence <= before.fence:
                report.violations["I1"].append(f"{sid}: fence {after.fence} after {before.fence}")
        granted = snapshot.fences.get(sid, 0)
        report.violations["I1"] += [
            f"{sid}: {r.fire_id} is still {r.state} under fence {r.fence}, "
            f"though fence {granted} was granted since"
            for r in runs
            if (r.state in IN_TURN or r.state == RunState.RESERVED) and r.fence < granted
        ]
        started = sorted(
            (r for r in runs if r.started_at is not None), key=lambda r: (r.started_at, r.id)
        )
        for before, after in pairwise(started):
            # A run still in its turn lasts until now: a later turn beside it is an overlap.
            end = before.finished_at or now
            if after.started_at is not None and after.started_at < end:
                report.overlapping_turns += 1
                report.violations["I1"].append(f"{sid}: {before.fire_id} overlaps {after.fire_id}")


def _unindexed(
    ledger: Ledger,
    gate: TurnGate,
    index: DueIndex,
    snapshot: LedgerSnapshot,
    settled_before: datetime,
) -> list[str]:
    """I5: active heartbeats nowhere in Redis, unchanged in SQL since ``settled_before``."""
    missing = [hb for hb in _expected(snapshot) if not _in_redis(gate, index, hb.session_id)]
    if not missing:
        return []
    # Looked at again after Redis was read: a heartbeat changed meanwhile is in flux, not lost.
    again = {hb.heartbeat_id: hb for hb in _expected(ledger.audit_snapshot())}
    return [
        f"{hb.session_id} is active but not in the index"
        for hb in missing
        if again.get(hb.heartbeat_id) == hb and hb.changed_at < settled_before
    ]


def _expected(snapshot: LedgerSnapshot) -> list[HeartbeatSnapshot]:
    return [
        hb
        for hb in snapshot.heartbeats
        if hb.status == HeartbeatStatus.ACTIVE and hb.session_status == SessionStatus.ACTIVE
    ]


def _in_redis(gate: TurnGate, index: DueIndex, sid: str) -> bool:
    return bool(index.due_ms(sid) is not None or gate.lock_holder(sid) or gate.pending(sid))


__all__ = ["InvariantReport", "audit", "check"]
