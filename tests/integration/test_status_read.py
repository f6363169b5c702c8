"""Issue 20, item 8: `hbgw heartbeat status` reads SQL straight from the DBAPI driver
(``sessions.status_read``), without SQLAlchemy. The store's read is the reference: on SQLite and
PostgreSQL, in every state, both give the same ``HeartbeatStatusView``, and the same error."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support.fires import begin
from support.seed import T0

from hbgw.core.errors import NotFound
from hbgw.core.usage import TokenUsage
from hbgw.sessions.grammar import CronSchedule, IntervalSchedule
from hbgw.sessions.grammar.hours import ActiveHours
from hbgw.sessions.grammar.policy import Policy
from hbgw.sessions.states import RunState
from hbgw.sessions.status_read import read_status
from hbgw.sessions.store import Store
from hbgw.sessions.views import Started


def both(store: Store, url: str, sid: str, now: datetime) -> None:
    quick = read_status(url, sid, now)
    assert quick is not None, "the quick read fell back to the store"
    assert quick == store.heartbeats.heartbeat_status(sid, now)
    assert quick.to_json() == store.heartbeats.heartbeat_status(sid, now).to_json()


def spend(store: Store, sid: str, now: datetime, tokens: int) -> None:
    begun = begin(store, sid, 1 + len(store.ledger.runs(sid)), now).outcome
    assert isinstance(begun, Started), begun
    run = begun.run
    store.ledger.finish_fire(
        run.key,
        RunState.COMPLETED,
        run.fence,
        now,
        reply="ok",
        reply_kind="assistant",
        usage=TokenUsage(tokens - 3, 3, "m"),
    )


def test_both_reads_agree_in_every_state(store: Store, db_url: str) -> None:
    sid = store.sessions.create_session(platform="slack", chat="C1", thread="t", now=T0).id
    both(store, db_url, sid, T0)  # no heartbeat
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(600),
        schedule_text="every 10m",
        prompt="check CI",
        now=T0,
        policy=Policy(exact=True, budget=1000, model="llama3", times=5),
    )
    both(store, db_url, sid, T0 + timedelta(minutes=3))  # active
    both(store, db_url, sid, T0 + timedelta(minutes=12))  # due
    spend(store, sid, T0 + timedelta(minutes=10), 70)
    spend(store, sid, T0 + timedelta(minutes=20), 30)
    later = T0 + timedelta(minutes=21)
    assert store.heartbeats.heartbeat_status(sid, later).tokens_today == 100  # spent today
    both(store, db_url, sid, later)
    both(store, db_url, sid, T0 + timedelta(days=1, minutes=1))  # the next UTC day: none
    store.heartbeats.pause_heartbeat(sid, later)
    both(store, db_url, sid, later)  # paused
    store.heartbeats.resume_heartbeat(sid, later)
    store.heartbeats.clear_heartbeat(sid, later)
    both(store, db_url, sid, later)  # cleared: "none", its generation still shown


def test_both_reads_agree_on_a_cron_heartbeat_with_hours_and_jitter(
    store: Store, db_url: str
) -> None:
    sid = store.sessions.create_session(platform="cli", chat="me", now=T0).id
    store.heartbeats.set_heartbeat(
        sid,
        schedule=CronSchedule("0 9 * * 1-5", "Europe/Paris"),
        schedule_text="cron 0 9 * * 1-5 tz Europe/Paris",
        prompt="standup",
        now=T0,
        policy=Policy(hours=ActiveHours.from_text("08:00-18:00 Europe/Paris weekdays")),
    )
    both(store, db_url, sid, T0 + timedelta(hours=1))


def test_a_missing_session_is_the_same_not_found(store: Store, db_url: str) -> None:
    with pytest.raises(NotFound) as quick:
        read_status(db_url, "no-such-session", T0)
    with pytest.raises(NotFound) as stored:
        store.heartbeats.heartbeat_status("no-such-session", T0)
    assert str(quick.value) == str(stored.value)
    assert quick.value.exit_code == stored.value.exit_code


def test_what_it_cannot_trust_is_left_to_the_store(tmp_path: Path) -> None:
    assert read_status(f"sqlite:///{tmp_path / 'not-yet.sqlite3'}", "s", T0) is None
    assert read_status("sqlite://", "s", T0) is None  # in memory
    assert read_status("mysql://u@h/db", "s", T0) is None
    behind = tmp_path / "behind.sqlite3"
    with sqlite3.connect(behind) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
        conn.execute("INSERT INTO alembic_version VALUES ('0001')")
    assert read_status(f"sqlite:///{behind}", "s", T0) is None  # to migrate: the store does
    assert read_status("postgresql://nobody@127.0.0.1:1/none", "s", T0) is None
