"""Retention (issue 19, part 4) on SQLite and PostgreSQL: a week of backdated fires and
messages, the clock moved past retention, one beat's retention step under the lease: old runs,
their delivery records and old messages go; what is in flight or queued stays; the heartbeat's
status (fires so far, tokens today, the dedupe digest), its fences and invariants I1–I4 are the
same before and after, and the next fire counts on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import redis
from support.fires import start
from support.harness import Gateway, gateway_settings
from support.ledger_week import fill, fire_once, heartbeat_session

from hbgw.beat.retention import RetentionStep
from hbgw.core.clock import to_ms, utcnow
from hbgw.core.metrics import gateway_metrics
from hbgw.core.settings import Settings
from hbgw.invariants import audit
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import MessageState, RunState
from hbgw.sessions.store import Store
from hbgw.state.keys import Keys
from hbgw.state.retention_lease import CONTINUE_MS, RetentionLease

END = datetime.fromisoformat("2026-12-09T12:30:00+00:00")
START = END - timedelta(days=7)
HOUR = 2 * 3600  # every two hours: 84 fires a week, enough and quicker to fill
KEEP_DAYS = 2
CUTOFF = END - timedelta(days=KEEP_DAYS)


def _settings(**overrides: object) -> Settings:
    values: dict[str, object] = {
        "retain_runs_days": KEEP_DAYS,
        "retain_messages_days": KEEP_DAYS,
        "retain_batch": 25,
        "retain_batches": 100,
        **overrides,
    }
    return Settings(**values)  # type: ignore[arg-type]


def _beat(store: Store, client: redis.Redis, keys: Keys, **overrides: object) -> RetentionStep:
    return RetentionStep(store.retention, RetentionLease(client, keys), _settings(**overrides))


@pytest.fixture
def week(store: Store) -> Iterator[tuple[str, str, int]]:
    """A heartbeat fired hourly for a week, a queued message from its first day, and another
    session's run left in its turn six days ago: (week's session, stuck session, its run).
    On PostgreSQL the week's day partitions exist, as beat's daily steps would have made them."""
    store.retention.add_partitions(START.date(), END.date())
    sid = heartbeat_session(store, "CWEEK", HOUR, START)
    store.messages.accept_message(sid, "still waiting", now=START, idempotency_key="k-queued")
    stuck = heartbeat_session(store, "C-stuck", HOUR, START)
    run = start(store, stuck, 1, START + timedelta(seconds=HOUR + 60))
    fill(store, sid, START, END, HOUR)
    yield sid, stuck, run.id


def _status(store: Store, sid: str) -> tuple[int, int, str | None, int]:
    view = store.heartbeats.heartbeat_status(sid, END)
    state = store.heartbeats.get_heartbeat(sid)
    assert view.state is not None and state is not None
    return (
        view.state.fire_count,
        view.tokens_today,
        state.last_reply_hash,
        store.ledger.max_fence(sid),
    )


def test_a_week_of_runs_is_cut_to_retention_with_every_count_exact(
    store: Store, redis_client: redis.Redis, keys: Keys, week: tuple[str, str, int]
) -> None:
    sid, stuck, stuck_run = week
    before = _status(store, sid)
    assert before[0] == len(store.ledger.runs(sid)) > 7 * 11
    assert audit(store.ledger.audit_snapshot(), END).ok
    first, second = _beat(store, redis_client, keys), _beat(store, redis_client, keys)
    counted = gateway_metrics().retention_deleted.labels("runs")
    deleted_before = counted._value.get()

    report = first.step(to_ms(END))
    assert counted._value.get() - deleted_before == report.runs
    assert report.ran and not report.more
    assert not second.step(to_ms(END)).ran  # the lease: one replica per interval

    runs = store.ledger.runs(sid)
    assert runs and all(r.reserved_at >= CUTOFF for r in runs)
    assert report.runs == before[0] - len(runs)
    assert all(r.delivery is not None for r in runs)  # the kept runs keep their records
    assert [r.id for r in store.ledger.runs(stuck)] == [stuck_run]  # in its turn: kept, however old
    messages = store.messages.list_messages(sid, limit=10_000)
    kept_old = [m for m in messages if m.created_at < CUTOFF]
    assert [(m.text, m.state) for m in kept_old] == [("still waiting", MessageState.QUEUED)]
    assert report.messages > 0
    assert store.messages.list_messages(stuck, limit=10)  # the stuck turn's prompt stays
    assert _status(store, sid) == before
    snapshot = store.ledger.audit_snapshot()
    assert audit(snapshot, END).ok
    [hb] = [h for h in snapshot.heartbeats if h.session_id == sid]
    assert hb.retired_runs == report.runs


def test_fires_after_retention_count_on_and_a_new_setting_starts_from_zero(
    store: Store, redis_client: redis.Redis, keys: Keys, week: tuple[str, str, int]
) -> None:
    sid = week[0]
    count = _status(store, sid)[0]
    _beat(store, redis_client, keys).run(END)
    fence = store.ledger.max_fence(sid) + 1
    later = fire_once(store, sid, fence, END + timedelta(seconds=HOUR))
    assert store.heartbeats.heartbeat_status(sid, later).state.fire_count == count + 1  # type: ignore[union-attr]
    assert audit(store.ledger.audit_snapshot(), later).ok
    store.heartbeats.set_heartbeat(
        sid, schedule=IntervalSchedule(HOUR), schedule_text="every 2h", prompt="p", now=later
    )
    _beat(store, redis_client, keys).run(later + timedelta(days=KEEP_DAYS, hours=2))
    assert store.heartbeats.heartbeat_status(sid, later).state.fire_count == 0  # type: ignore[union-attr]
    assert audit(store.ledger.audit_snapshot(), later).ok


def test_a_step_is_bounded_and_leaves_the_rest_to_the_next_tick(
    store: Store, redis_client: redis.Redis, keys: Keys, week: tuple[str, str, int]
) -> None:
    sid = week[0]
    total = len(store.ledger.runs(sid))
    beat = _beat(store, redis_client, keys, retain_batch=10, retain_batches=2)
    report = beat.step(to_ms(END))
    assert report.more
    # SQLite: two batches of ten. PostgreSQL: at most two day partitions a table, then the
    # same two batches for what the kept partitions and the default hold.
    assert report.partitions <= 4
    if store.engine.dialect.name == "sqlite":
        assert report.runs == 20
    assert len(store.ledger.runs(sid)) == total - report.runs
    # The lease is shortened, so the next tick of any replica goes on.
    assert 0 < redis_client.pttl(keys.retention_lease()) <= CONTINUE_MS
    assert audit(store.ledger.audit_snapshot(), END).ok


def test_retention_off_deletes_nothing(
    store: Store, redis_client: redis.Redis, keys: Keys, week: tuple[str, str, int]
) -> None:
    sid = week[0]
    total = len(store.ledger.runs(sid))
    beat = _beat(store, redis_client, keys, retain_runs_days=0, retain_messages_days=0)
    assert not beat.step(to_ms(END)).ran
    assert len(store.ledger.runs(sid)) == total
    assert store.ledger.runs(sid)[0].state == RunState.COMPLETED


def test_beat_runs_retention_in_its_tick(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    settings = gateway_settings(tmp_path, redis_url, redis_ns, retain_runs_days=1)
    gw = Gateway(settings, redis_url)
    try:
        now = utcnow()
        sid = heartbeat_session(gw.store, "CBEAT", 6 * HOUR, now - timedelta(days=3))
        fill(gw.store, sid, now - timedelta(days=3), now - timedelta(hours=1), 6 * HOUR)
        total = len(gw.runs(sid))
        gw.tick()
        kept = gw.runs(sid)
        assert 0 < len(kept) < total
        assert all(r.reserved_at >= now - timedelta(days=1, minutes=1) for r in kept)
        assert audit(gw.store.ledger.audit_snapshot(), utcnow()).ok
    finally:
        gw.close()
