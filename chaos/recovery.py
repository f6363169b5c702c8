"""Time to recover per fault, measured from the ledger after the run.

Two views of one fault:

- ``heartbeats_recovered_s``: from the fault's end until every active heartbeat had fired again
  (a healthy system needs up to its longest interval: a heartbeat that fired just before the end
  fires again one interval later).
- ``recovered_s``: how long the fault held work back past its end, which is 0 on a system that
  had nothing to catch up: the largest delay of a heartbeat's first fire after the end behind
  the time it was due (its last fire before the end plus its interval, or the end itself), and
  the time until every user message accepted while the fault lasted (or still waiting from
  before it, unanswered at its end) was answered. ``None``
  while a heartbeat due well before the snapshot never fired again or a message was never
  answered. ``recovery_bounded`` in chaos/checks.py judges this one.

  It is measured in the fault's own window, from its end to the next fault's beginning (or
  the snapshot): a heartbeat due after the next fault began is that fault's to answer for,
  and a wait that runs into the next fault is cut there (``cut_by_next``) — the next fault's
  own recovery then shows what was still held back.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from chaos.evidence import REACHED_AGENT, Evidence, Heartbeat, on_schedule


def next_fault(ev: Evidence, ended: float) -> float | None:
    """When the first fault after ``ended`` began, if one did."""
    return min((f.began for f in ev.faults if f.began > ended), default=None)


def recovery(ev: Evidence, began: float, ended: float) -> dict[str, Any]:
    fires = _fires(ev)
    until = next_fault(ev, ended)
    firsts: list[float | None] = []
    for hb in ev.heartbeats:
        if on_schedule(ev, hb):
            after = [t for t in fires[hb.session] if t > ended]
            firsts.append(after[0] if after else None)
    answered = {r.reply_to: r.created for r in ev.replies}
    during = [m.id for m in ev.messages if began <= m.created <= ended]
    # Messages still waiting when the fault began (held back by an earlier one) are held back
    # by this one too: a backlog never answered shows here, not only in the earlier window.
    backlog = [
        m.id
        for m in ev.messages
        if m.created < began - ev.interrupt_window and answered.get(m.id, ended + 1) > ended
    ]
    during += backlog
    messages = _latest([answered.get(mid) for mid in during], ended)
    delayed, cut = heartbeat_delay(ev, ended, fires, until)
    waited = messages
    if until is not None:
        # A message still unanswered when the next fault began waited at least until then.
        waits = [answered.get(mid, until) for mid in during]
        waited = _latest([min(t, until) for t in waits], ended)
        cut = cut or any(t > until for t in waits)
    recovered = None if delayed is None or waited is None else round(max(delayed, waited, 0.0), 2)
    return {
        "heartbeats_recovered_s": _latest(firsts, ended),
        "heartbeats_delayed_s": delayed,
        "messages_during": len(during) - len(backlog),
        "messages_backlog": len(backlog),
        "messages_recovered_s": messages,
        "recovered_s": recovered,
        "cut_by_next": cut,
    }


def _fires(ev: Evidence) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in ev.runs:
        if r.state in REACHED_AGENT and r.job is None:  # a heartbeat's fire, not a job's run
            out[r.session].append(r.reserved)
    for times in out.values():
        times.sort()
    return out


def heartbeat_delay(
    ev: Evidence,
    ended: float,
    fires: dict[str, list[float]] | None = None,
    until: float | None = None,
) -> tuple[float | None, bool]:
    """The longest a heartbeat's first fire after ``ended`` came behind its due time (0 or
    more), counting only heartbeats due before ``until`` and cutting a wait there (then the
    second value is True); None when one due well before the snapshot never fired again."""
    fires = _fires(ev) if fires is None else fires
    worst, cut = 0.0, False
    for hb in ev.heartbeats:
        if not on_schedule(ev, hb):
            continue
        due = _due_after(hb, fires[hb.session], ended)
        if until is not None and due >= until:
            continue
        first = next((t for t in fires[hb.session] if t > ended), None)
        if until is not None and (first is None or first > until):
            first, cut = until, True
        if first is not None:
            worst = max(worst, first - due)
        elif due < ev.snapshot - ev.grace - ev.recovery_bound * ev.load_factor:
            return None, cut
    return round(worst, 2), cut


def _due_after(hb: Heartbeat, times: list[float], ended: float) -> float:
    before = [t for t in times if t <= ended]
    last = before[-1] if before else hb.set_at
    return max(ended, last + hb.interval)


def _latest(times: list[float | None], ended: float) -> float | None:
    """Seconds from ``ended`` to the last of ``times``; None while any is still missing."""
    if any(t is None for t in times):
        return None
    return round(max((t for t in times if t is not None), default=ended) - ended, 2)
