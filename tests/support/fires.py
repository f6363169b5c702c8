"""A heartbeat fire's ledger steps through the store's production API, as a worker takes them:
``begin_fire`` at the lock grant (claim, reservation, re-check and start, or the reservation
given back at once), ``mark_delivering`` before a send, ``finish_fire`` at the end. Tests build
ledger states with these, never with methods only tests would call."""

from __future__ import annotations

from datetime import datetime

from hbgw.core.clock import to_ms, utcnow
from hbgw.sessions.states import RefundReason, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.views import (
    FireBegin,
    FireStart,
    RestoreEntry,
    RunKey,
    RunView,
    Started,
)
from hbgw.state.turn_gate import Began
from support.harness import Gateway, wait_until

PROMPT = "check CI"


def due_fire(store: Store, sid: str, now: datetime) -> tuple[str, int]:
    """The fire id and due time (ms) of the heartbeat's next due fire."""
    due = store.heartbeats.heartbeat_status(sid, now).next_due
    assert due is not None, f"{sid} has no due heartbeat"
    return fire_id(sid, to_ms(due)), to_ms(due)


def begin(
    store: Store,
    sid: str,
    fence: int,
    now: datetime,
    *,
    refusal: RefundReason | None = None,
    history: int = 0,
) -> FireBegin:
    """A new grant ``fence`` begins the session's next due fire, as a worker does: one
    transaction claims, reserves, re-checks (``refusal``: what Redis read with the lock) and
    starts it, or gives it back at once."""
    fid, due_ms = due_fire(store, sid, now)
    start = FireStart(
        store.sessions.get_session(sid).conversation,
        lambda _state: PROMPT,
        history,
        refusal=refusal,
        worker="w1",
    )
    return store.ledger.begin_fire(sid, fence, fid, due_ms, now, start)


def start(store: Store, sid: str, fence: int, now: datetime) -> RunView:
    """The next due fire begins and its run starts (its prompt stored as the turn's message)."""
    begun = begin(store, sid, fence, now).outcome
    assert isinstance(begun, Started), begun
    return begun.run


def finish(
    store: Store, run_key: RunKey, outcome: RunState, fence: int, now: datetime, reply: str = "ok"
) -> RunView:
    """The started run ends with ``outcome``; its reply is stored with it."""
    return store.ledger.finish_fire(
        run_key, outcome, fence, now, reply=reply, reply_kind="assistant"
    ).run


def restorable(store: Store) -> list[RestoreEntry]:
    """Every restorable heartbeat, as beat's restore pass reads them (one large page)."""
    page = store.restore.restorable_page("", 1000)
    assert page.rows < 1000, "a test made more heartbeats than one page holds"
    return page.entries


VANISHED_LEASE_MS = 100  # the vanished worker's lock lease


def vanished_turn(
    gw: Gateway,
    started_at: datetime,
    *,
    delivering: bool = False,
    lease_ms: int = VANISHED_LEASE_MS,
) -> RunView:
    """A run started by a worker that then disappeared, its lock left to expire (``lease_ms``:
    longer for a turn that is alive after all, so its lock is held from the start)."""
    sid = gw.session()
    gw.due_now(sid, missed=int((utcnow() - started_at).total_seconds()) // 60 + 1)
    due = gw.rt.index.due_ms(sid)
    assert due is not None
    begun = gw.rt.gate.try_begin_fire(sid, fire_id(sid, due), "vanished-worker", lease_ms)
    assert isinstance(begun, Began)
    run = start(gw.store, sid, begun.fence, started_at)
    if delivering:
        run = gw.store.ledger.mark_delivering(
            run.key, begun.fence, started_at, channel="file", kind="heartbeat"
        )
    return run


def lock_free(gw: Gateway, sid: str) -> None:
    wait_until(lambda: gw.rt.gate.lock_holder(sid) is None, what="the vanished lock's lease")
