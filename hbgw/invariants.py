"""The invariants I1–I5 of docs/contract.md, computed from the ledger (and the index for I5).

I1 at most one turn per session at a time: fences strictly increase, run intervals never overlap
I2 at most one run per fire id
I3 fire count equals the runs that reached the agent since the heartbeat was last set
I4 no refunded (or abandoned) run has a start time
I5 every active heartbeat of an active session is in the index, running or pending
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import Any

from sessions.states import GIVEN_BACK, REACHED_AGENT, HeartbeatStatus, SessionStatus
from sessions.views import RunView
from state.runtime import Runtime


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


def check(rt: Runtime, now: datetime, *, include_index: bool = True) -> InvariantReport:
    runs = rt.store.runs()
    report = InvariantReport(violations={f"I{i}": [] for i in range(1, 6)})
    _turns(runs, now, report)
    counts = Counter(r.fire_id for r in runs)
    dups = [f for f, n in counts.items() if n > 1]
    report.duplicate_fires = len(dups)
    report.violations["I2"] += [f"fire {f} ran {counts[f]} times" for f in dups]
    by_heartbeat: dict[int, list[RunView]] = defaultdict(list)
    for run in runs:
        by_heartbeat[run.heartbeat_id].append(run)
    audits = rt.store.heartbeat_audit()
    for audit in audits:
        reached = sum(
            1
            for r in by_heartbeat[audit.heartbeat_id]
            if r.state in REACHED_AGENT and r.reserved_at >= audit.set_at
        )
        if audit.status != HeartbeatStatus.CLEARED and reached != audit.fire_count:
            report.violations["I3"].append(
                f"heartbeat of {audit.session_id}: count {audit.fire_count}, runs {reached}"
            )
    report.violations["I4"] += [
        f"{r.fire_id} is {r.state} but started"
        for r in runs
        if r.state in GIVEN_BACK and r.started_at is not None
    ]
    if include_index:
        for audit in audits:
            if (
                audit.status != HeartbeatStatus.ACTIVE
                or audit.session_status != SessionStatus.ACTIVE
            ):
                continue
            sid = audit.session_id
            present = rt.index.due_ms(sid) is not None
            if not (present or rt.gate.lock_holder(sid) or rt.gate.pending(sid)):
                report.violations["I5"].append(f"{sid} is active but not in the index")
    return report


def _turns(runs: list[RunView], now: datetime, report: InvariantReport) -> None:
    per_session: dict[str, list[RunView]] = defaultdict(list)
    for run in runs:
        per_session[run.session_id].append(run)
    for sid, session_runs in per_session.items():
        ordered = sorted(session_runs, key=lambda r: (r.reserved_at, r.id))
        for before, after in pairwise(ordered):
            if after.fence <= before.fence:
                report.violations["I1"].append(f"{sid}: fence {after.fence} after {before.fence}")
        started = sorted(
            (r for r in session_runs if r.started_at is not None),
            key=lambda r: r.started_at or now,
        )
        for before, after in pairwise(started):
            if before.finished_at is None and after.fence > before.fence:
                # An interrupted turn (its worker died): the lock, and so the turn, ended when
                # a newer fence was granted.
                continue
            end = before.finished_at or now
            if after.started_at is not None and after.started_at < end:
                report.overlapping_turns += 1
                report.violations["I1"].append(f"{sid}: {before.fire_id} overlaps {after.fire_id}")
