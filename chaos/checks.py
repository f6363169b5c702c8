"""The checks of a chaos run, computed from its evidence alone (pure: tests feed them by hand).

Each check accounts for what the design tolerates, so a correct system passes while faults
happen: work younger than ``grace`` at the snapshot may still be in flight; a turn whose worker
was SIGKILLed may stay ``started`` (it reached the agent and counts once); and a worker killed or
paused in the instant between a send and its commit may make the platform see that send twice
(at-least-once delivery), which is reported as tolerated, not as a failure. A message sent
again (a user reply or a fire) is tolerated only when the channel record marks it ``repeat``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from chaos.evidence import (
    IN_TURN_STATES,
    REACHED_AGENT,
    Delivery,
    Evidence,
    Run,
    exit_cause,
    on_schedule,
)
from chaos.schedule_checks import jitter_applied, no_fire_outside_hours, one_run_per_due_time
from chaos.send_checks import recovery_bounded, send_after_lock_moved, unmarked_repeat
from chaos.verdict import Check as Check
from chaos.verdict import sends_in_order
from chaos.webhook_checks import webhook_delivered_once
from hbgw.sessions.states import LostLockDetail

DELIVERING = {"completed", "failed"}
GIVEN_BACK = {"refunded", "abandoned"}
UNFINISHED = {"reserved", *IN_TURN_STATES}  # started, delivering
WORKER_FAULTS = {"worker_kill", "worker_pause"}


def run_checks(ev: Evidence) -> list[Check]:
    return [check(ev) for check in ALL_CHECKS]


def _interrupted_after(ev: Evidence, at: float, worker: str | None = None) -> bool:
    """A worker was killed or paused just after ``at``: a commit may have been cut off."""
    return any(
        f.kind in WORKER_FAULTS
        and (worker is None or f.target == worker)
        and at <= f.began <= at + ev.interrupt_window
        for f in ev.faults
    )


def _settled(ev: Evidence, at: float) -> bool:
    return at < ev.snapshot - ev.grace


# -- no fire id twice ------------------------------------------------------------------------


def duplicate_fires(ev: Evidence) -> Check:
    check = Check("no_duplicate_fires")
    for fire, n in Counter(r.fire_id for r in ev.runs).items():
        if n > 1:
            check.failures.append(f"fire {fire} has {n} ledger rows")
    # A marked repeat is the platform told "sent again": no_unmarked_repeat judges the marking.
    sent = Counter(d.ref for d in sends_in_order(ev) if d.ref and not d.repeat)
    for fire, n in sent.items():
        if n > 1:
            check.failures.append(f"fire {fire} was delivered {n} times")
    check.figures["duplicates"] = len(check.failures)
    return check


# -- no two turns of a session overlapping ---------------------------------------------------


@dataclass(frozen=True)
class Turn:
    what: str
    start: float
    end: float


def _heartbeat_turns(ev: Evidence, sends: list[Delivery]) -> dict[str, list[Turn]]:
    sent_at: dict[str, list[float]] = defaultdict(list)
    for d in sends:
        if d.ref:
            sent_at[d.ref].append(d.at)
    turns: dict[str, list[Turn]] = defaultdict(list)
    for r in ev.runs:
        if r.started is None:
            continue
        # A turn lasts as long as anything of it is seen: a send after its finish (or from a
        # turn that never finished) extends it.
        end = max([r.started, r.finished or r.started, *sent_at[r.fire_id]])
        turns[r.session].append(Turn(f"fire {r.fire_id} (fence {r.fence})", r.started, end))
    return turns


def _user_turns(ev: Evidence) -> dict[str, list[Turn]]:
    """Each attempt at a message: from its typing signal to its send (or the typing alone)."""
    turns: dict[str, list[Turn]] = defaultdict(list)
    by_message: dict[tuple[str, str], list[Delivery]] = defaultdict(list)
    for d in ev.deliveries:
        if d.reply_to is not None and d.call in ("send", "typing"):
            by_message[(d.session, d.reply_to)].append(d)
    for (sid, mid), records in by_message.items():
        start: float | None = None
        for d in sorted(records, key=lambda d: (d.at, d.call != "typing")):
            if d.call == "typing":
                if start is not None:  # an attempt that never sent (its worker died)
                    turns[sid].append(Turn(f"message {mid}", start, start))
                start = d.at
            else:
                turns[sid].append(Turn(f"message {mid}", d.at if start is None else start, d.at))
                start = None
        if start is not None:
            turns[sid].append(Turn(f"message {mid}", start, start))
    return turns


def overlapping_turns(ev: Evidence) -> Check:
    check = Check("no_overlapping_turns")
    turns = _heartbeat_turns(ev, sends_in_order(ev))
    for sid, user in _user_turns(ev).items():
        turns[sid].extend(user)
    for sid, session_turns in turns.items():
        ordered = sorted(session_turns, key=lambda t: (t.start, t.end))
        latest: Turn | None = None
        for turn in ordered:
            if latest is not None and turn.start < latest.end:
                check.failures.append(
                    f"{sid}: {turn.what} began {turn.start - latest.start:.2f}s into "
                    f"{latest.what}, which lasted until {latest.end - latest.start:.2f}s"
                )
            if latest is None or turn.end > latest.end:
                latest = turn
    by_session: dict[str, list[Run]] = defaultdict(list)
    for r in ev.runs:
        by_session[r.session].append(r)
    for sid, runs in by_session.items():
        for before, after in pairwise(sorted(runs, key=lambda r: r.reserved)):
            if after.fence <= before.fence:
                check.failures.append(
                    f"{sid}: {after.fire_id} reserved with fence {after.fence} after "
                    f"{before.fire_id} with fence {before.fence}"
                )
    check.figures["overlaps"] = len(check.failures)
    return check


# -- refunds and final states ----------------------------------------------------------------


def refunded_started(ev: Evidence) -> Check:
    check = Check("no_refunded_run_started")
    check.failures = [
        f"{r.fire_id} is {r.state} but started"
        for r in ev.runs
        if r.state in GIVEN_BACK and r.started
    ]
    return check


def unfinished_runs(ev: Evidence) -> Check:
    """Every run reaches a final state, except a started one whose worker was SIGKILLed."""
    check = Check("no_unfinished_runs")
    for r in ev.runs:
        if r.state not in UNFINISHED or not _settled(ev, r.reserved):
            continue
        if r.state in IN_TURN_STATES and r.started is not None and _killed_during(ev, r):
            check.tolerated.append(f"{r.fire_id} started on {r.worker}, which was SIGKILLed")
            continue
        check.failures.append(f"{r.fire_id} still {r.state} (worker {r.worker})")
    check.figures["unfinished"] = len(check.failures)
    return check


def _killed_during(ev: Evidence, r: Run) -> bool:
    assert r.started is not None
    return any(
        f.kind == "worker_kill"
        and f.target == r.worker
        and r.started <= f.began
        # A turn that started a whole in-flight window before the kill should have finished.
        and f.began <= r.started + ev.grace
        for f in ev.faults
    )


# -- heartbeats keep firing ------------------------------------------------------------------


def _gaps(ev: Evidence, sid: str, interval: float, since: float) -> list[tuple[float, float]]:
    fires = sorted(
        r.reserved
        for r in ev.runs
        if r.session == sid
        and r.job is None
        and r.state in REACHED_AGENT
        and since < r.reserved <= ev.snapshot
    )
    points = [since, *fires, ev.snapshot]
    return [(a, b - a - interval) for a, b in pairwise(points)]


def heartbeat_lateness(ev: Evidence) -> Check:
    """After the last fault ended, no gap between fires exceeds the interval by more than the
    allowance (a claim lease, a restore pass and a refund back-off, times the machine's load
    factor); the tail up to the snapshot counts as a gap."""
    check = Check("heartbeats_on_time")
    last_fault = max((f.ended for f in ev.faults), default=0.0)
    quiet = ev.snapshot - last_fault
    # Never more than half the quiet window: a heartbeat that stopped firing must still fail.
    allowance = max(ev.allowance, min(ev.allowance * ev.load_factor, quiet / 2))
    worst = 0.0
    for hb in ev.heartbeats:
        if not on_schedule(ev, hb):
            continue
        since = max(last_fault, hb.set_at)
        for start, late in _gaps(ev, hb.session, hb.interval, since):
            worst = max(worst, late)
            if late > allowance:
                check.failures.append(
                    f"{hb.session} (every {hb.interval:g}s) fired {late:.1f}s late after "
                    f"{start - since:.1f}s into the quiet window"
                )
    check.figures["max_lateness_s"] = round(worst, 2)
    check.figures["allowance_s"] = round(allowance, 2)
    check.figures["load_factor"] = ev.load_factor
    check.figures["since_last_fault_s"] = round(quiet, 1)
    return check


# -- user messages answered exactly once -----------------------------------------------------


def messages_answered_once(ev: Evidence) -> Check:
    """Exactly one reply row and one send per message; a send again is accepted only when its
    channel record says ``repeat`` (no window after a kill or pause excuses an unmarked one)."""
    check = Check("messages_answered_once")
    replies = Counter(r.reply_to for r in ev.replies)
    sends: dict[str, list[Delivery]] = defaultdict(list)
    for d in sends_in_order(ev):
        if d.reply_to is not None:
            sends[d.reply_to].append(d)
    known = {m.id for m in ev.messages}
    lost = [f"message {mid} accepted but not in SQL" for mid in ev.accepted if mid not in known]
    doubled: list[str] = []
    for m in ev.messages:
        sent = sends[str(m.id)]
        first = [d for d in sent if not d.repeat]
        if m.state != "done" or not replies[m.id] or not sent:
            lost.append(
                f"message {m.id} of {m.session}: {m.state}, {replies[m.id]} replies, "
                f"{len(sent)} sends"
            )
        elif replies[m.id] > 1 or len(first) > 1:
            doubled.append(
                f"message {m.id} of {m.session}: {replies[m.id]} replies, {len(sent)} sends "
                f"({len(sent) - len(first)} marked repeat)"
            )
        elif len(sent) > 1:
            check.tolerated.append(f"message {m.id}: sent again, marked repeat")
    check.failures = lost + doubled
    check.figures.update(
        messages=len(ev.messages), lost=len(lost), answered_twice=len(doubled),
    )  # fmt: skip
    return check


# -- nothing stale reaches a platform --------------------------------------------------------


def stale_deliveries(ev: Evidence) -> Check:
    """Every send matches a finished run or a recorded reply, in fence order per session."""
    check = Check("no_stale_deliveries")
    runs = {r.fire_id: r for r in ev.runs}
    done = {m.id for m in ev.messages if m.state == "done"}
    answered = {r.reply_to for r in ev.replies}
    for d in sends_in_order(ev):
        if not _settled(ev, d.at):
            continue
        problem = _send_problem(d, runs, done, answered)
        if problem is None:
            continue
        run = runs.get(d.ref or "")
        worker = run.worker if run else None
        (check.tolerated if _interrupted_after(ev, d.at, worker) else check.failures).append(
            f"{d.kind} to {d.session} at {d.at:.2f}: {problem}"
        )
    sends = sends_in_order(ev)
    check.failures += _out_of_fence_order(sends, runs)
    sent = {d.ref for d in sends}
    lost = [
        f"{r.fire_id} {r.state} but never sent"
        for r in ev.runs
        if r.state in DELIVERING
        and _settled(ev, r.reserved)  # the channel was read a moment before SQL
        and r.fire_id not in sent
        and not (r.detail or "").startswith("delivery failed")
        # A turn cut off from its lock sends nothing (before) or may not have (during).
        and r.detail not in set(LostLockDetail)
    ]
    check.failures += lost
    check.figures.update(stale=len(check.failures) - len(lost), heartbeat_replies_lost=len(lost))
    return check


def _send_problem(
    d: Delivery, runs: dict[str, Run], done: set[int], answered: set[int]
) -> str | None:
    if d.ref:
        run = runs.get(d.ref)
        if run is None:
            return f"fire {d.ref} is not in the ledger"
        if run.state not in DELIVERING:
            return f"fire {d.ref} is {run.state}"
        if run.detail in (LostLockDetail.BEFORE_DELIVERY, LostLockDetail.CUT_OFF_BEFORE_DELIVERY):
            return f"fire {d.ref} was sent after its turn lost the lock"
        return None
    if d.reply_to is not None and d.reply_to.isdigit():
        mid = int(d.reply_to)
        if mid not in done or mid not in answered:
            return f"message {mid} has no recorded reply"
        return None
    return "no fire or message it answers"


def _out_of_fence_order(sends: list[Delivery], runs: dict[str, Run]) -> list[str]:
    newest: dict[str, Run] = {}
    out: list[str] = []
    for d in sends:
        run = runs.get(d.ref or "")
        if run is None:
            continue
        seen = newest.get(run.session)
        if seen is not None and run.fence < seen.fence:
            out.append(
                f"{run.fire_id} (fence {run.fence}) sent after {seen.fire_id} (fence {seen.fence})"
            )
        if seen is None or run.fence > seen.fence:
            newest[run.session] = run
    return out


# -- processes and faults --------------------------------------------------------------------


def processes_stayed_up(ev: Evidence) -> Check:
    check = Check("no_process_exited")
    check.failures = [
        f"{e.role} (pid {e.pid}) exited with {e.code} at {e.at:.1f} and stayed down; "
        f"its log: {exit_cause(e.last_lines)}"
        for e in ev.exits
    ]
    return check


def tenant_kept_out(ev: Evidence) -> Check:
    """Issue 29's high findings, tried by a tenant during the run (``chaos/tenant.py``): each
    attempt refused with a sentence, nothing of the tenant's stored but its one legitimate
    session, and no secret of the deployment's in any text the channel delivered."""
    check = Check("tenant_kept_out")
    if not ev.attempts:
        check.failures.append("the tenant never ran: no attempt recorded")
    check.failures += [
        f"not refused: {a.name} answered {a.status or 'nothing'} ({a.answer[:120]!r})"
        for a in ev.attempts
        if not a.refused
    ]
    check.failures += [
        f"stored for the tenant: {s.platform} session {s.id} on {s.chat!r}"
        + (f" posting to {s.webhook_url}" if s.webhook_url else "")
        for s in ev.tenant_sessions
        if s.id != ev.tenant_control or s.webhook_url != ev.tenant_route
    ]
    check.failures += [f"a delivered text held a secret: {leak}" for leak in ev.leaks]
    check.figures.update(
        attempts=len(ev.attempts), refused=sum(a.refused for a in ev.attempts), leaks=len(ev.leaks)
    )
    return check


def faults_injected(ev: Evidence) -> Check:
    check = Check("every_fault_injected")
    seen = Counter(f.kind for f in ev.faults)
    check.failures = [
        f"{kind} never injected"
        for kind in ev.expected_faults
        if not seen[kind] and kind not in ev.skipped_faults
    ]
    check.figures.update(injected=dict(seen), skipped=list(ev.skipped_faults))
    return check


ALL_CHECKS: list[Callable[[Evidence], Check]] = [
    faults_injected,
    duplicate_fires,
    overlapping_turns,
    refunded_started,
    unfinished_runs,
    heartbeat_lateness,
    messages_answered_once,
    stale_deliveries,
    send_after_lock_moved,
    unmarked_repeat,
    webhook_delivered_once,
    one_run_per_due_time,
    no_fire_outside_hours,
    jitter_applied,
    recovery_bounded,
    processes_stayed_up,
    tenant_kept_out,
]
