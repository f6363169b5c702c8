"""Small helpers shared by test modules."""

from __future__ import annotations

from datetime import UTC, datetime

from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.store import Store

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def make_session_with_heartbeat(store: Store, *, seconds: int = 600, now: datetime = T0) -> str:
    session = store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=now)
    store.heartbeats.set_heartbeat(
        session.id,
        schedule=IntervalSchedule(seconds=seconds),
        schedule_text=f"every {seconds}s",
        prompt="check CI",
        now=now,
    )
    return session.id
