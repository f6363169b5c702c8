"""A week of a heartbeat's fires in the ledger, backdated through the store's production steps
(claim, start, the fenced delivery mark, finish with tokens and a sent delivery), for the
retention tests and the ledger-size benchmark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hbgw.core.usage import TokenUsage
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import DeliveryState, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import DeliveryOutcome
from support.fires import due_fire, start

USAGE = TokenUsage(prompt_tokens=100, completion_tokens=20, model="m")


@dataclass(frozen=True)
class Week:
    sid: str
    fences: int  # the last fence granted (one per fire)
    ended: datetime  # when the last fire finished


def heartbeat_session(store: Store, chat: str, seconds: int, now: datetime) -> str:
    sid = store.sessions.create_session(platform="cli", chat=chat, thread=None, now=now).id
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(seconds=seconds),
        schedule_text=f"every {seconds}s",
        prompt="check CI",
        now=now,
    )
    return sid


def fire_once(store: Store, sid: str, fence: int, now: datetime, reply: str = "ok") -> datetime:
    """One whole fire at ``now`` of the heartbeat due at or before it; when it ended."""
    fid, _due_ms = due_fire(store, sid, now)
    at = now
    run = start(store, sid, fence, at)
    store.ledger.mark_delivering(run.key, fence, at, channel="file", kind="heartbeat")
    done = at + timedelta(seconds=1)
    sent = DeliveryOutcome(fid, DeliveryState.SENT, platform_message_id=str(fence))
    store.ledger.finish_fire(
        run.key,
        RunState.COMPLETED,
        fence,
        done,
        reply=reply,
        reply_kind="assistant",
        usage=USAGE,
        delivered=sent,
        channel="file",
    )
    return done


def fill(store: Store, sid: str, since: datetime, until: datetime, seconds: int) -> Week:
    """Fire the heartbeat (set at ``since``, every ``seconds``) at each due time before
    ``until``: fence n for the n-th fire."""
    fence, at = 0, since
    while at + timedelta(seconds=seconds) < until:
        fence += 1
        at = fire_once(store, sid, fence, at + timedelta(seconds=seconds))
    return Week(sid, fence, at)
