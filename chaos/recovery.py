"""Time to recover per fault, measured from the ledger after the run.

A fault has recovered for heartbeats when every active heartbeat has fired again after the
fault ended (a healthy system needs at most its longest interval), and for user messages when
every message accepted while it lasted has been answered.
"""

from __future__ import annotations

from typing import Any

from chaos.checks import REACHED_AGENT
from chaos.evidence import Evidence


def recovery(ev: Evidence, began: float, ended: float) -> dict[str, Any]:
    firsts: list[float | None] = []
    for hb in ev.heartbeats:
        if not hb.active:
            continue
        after = [
            r.reserved
            for r in ev.runs
            if r.session == hb.session and r.state in REACHED_AGENT and r.reserved > ended
        ]
        firsts.append(min(after) if after else None)
    heartbeats = _latest(firsts, ended)
    answered = {r.reply_to: r.created for r in ev.replies}
    during = [m.id for m in ev.messages if began <= m.created <= ended]
    waits = [answered.get(mid) for mid in during]
    messages = _latest(waits, ended)
    return {
        "heartbeats_recovered_s": heartbeats,
        "messages_during": len(during),
        "messages_recovered_s": messages,
    }


def _latest(times: list[float | None], ended: float) -> float | None:
    """Seconds from ``ended`` to the last of ``times``; None while any is still missing."""
    if any(t is None for t in times):
        return None
    return round(max((t for t in times if t is not None), default=ended) - ended, 2)
