"""A heartbeat fire's ledger steps through the store's production API, as a worker takes them:
``claim_fire`` at the lock grant, ``start_fire`` after the re-check, ``finish_fire`` at the end
(``refund_fire`` when the re-check refuses). Tests build ledger states with these, never with
methods only tests would call."""

from __future__ import annotations

from datetime import datetime

from core.clock import to_ms
from sessions.states import RunState, fire_id
from sessions.store import Store
from sessions.views import Reserved, RestoreEntry, RunView, Started

PROMPT = "check CI"


def due_fire(store: Store, sid: str, now: datetime) -> tuple[str, int]:
    """The fire id and due time (ms) of the heartbeat's next due fire."""
    due = store.heartbeat_status(sid, now).next_due
    assert due is not None, f"{sid} has no due heartbeat"
    return fire_id(sid, to_ms(due)), to_ms(due)


def reserve(store: Store, sid: str, fence: int, now: datetime) -> RunView:
    """A new grant ``fence`` claims the session and reserves its next due fire."""
    fid, due_ms = due_fire(store, sid, now)
    outcome = store.claim_fire(sid, fence, fid, due_ms, now, worker="w1").outcome
    assert isinstance(outcome, Reserved), outcome
    return outcome.run


def start(store: Store, run: RunView, fence: int, now: datetime) -> RunView:
    """The re-check passes and the run starts (its prompt stored as the turn's message)."""
    conversation = store.get_session(run.session_id).conversation
    begun = store.start_fire(
        run.id, fence, now, conversation=conversation, owner_changed=False, prompt=PROMPT, history=0
    )
    assert isinstance(begun, Started), begun
    return begun.run


def finish(
    store: Store, run_id: int, outcome: RunState, fence: int, now: datetime, reply: str = "ok"
) -> RunView:
    """The started run ends with ``outcome``; its reply is stored with it."""
    return store.finish_fire(run_id, outcome, fence, now, reply=reply, reply_kind="assistant").run


def restorable(store: Store) -> list[RestoreEntry]:
    """Every restorable heartbeat, as beat's restore pass reads them (one large page)."""
    page = store.restorable_page("", 1000)
    assert page.rows < 1000, "a test made more heartbeats than one page holds"
    return page.entries
