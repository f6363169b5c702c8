"""PostgreSQL's day partitions (migration 0017): a week of fires in their days, the clock
moved, beat's retention step drops the days wholly past retention (not the one holding a run
in its turn and a queued message) with every count exact; a row whose day has no partition is
kept in the default one and moves into its day when that is created; the fire day is bound to
the fire id; and the migration converts a ledger already full, both ways."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta

import pytest
import redis
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError
from support.fires import start
from support.ledger_week import fill, fire_once, heartbeat_session

from hbgw.beat.retention import RetentionStep
from hbgw.core.clock import to_ms
from hbgw.core.settings import Settings
from hbgw.invariants import audit
from hbgw.sessions.db import downgrade, make_engine, upgrade
from hbgw.sessions.store import Store
from hbgw.sessions.store.partitions import day_name, day_partitions
from hbgw.sessions.views import FireStart
from hbgw.state.keys import Keys
from hbgw.state.retention_lease import RetentionLease

END = datetime.fromisoformat("2027-03-09T12:30:00+00:00")  # days no wall clock made ahead
START = END - timedelta(days=7)
EVERY = 2 * 3600
KEEP_DAYS = 2

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store(pg_schema_url: str) -> Iterator[Store]:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    yield Store(engine)
    engine.dispose()


def _days(engine: Engine, table: str) -> set[str]:
    with engine.connect() as conn:
        return {name for name, _ in day_partitions(conn, table)}


def _in_default(engine: Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(text(f"SELECT count(*) FROM {table}_default")) or 0)


def test_a_week_of_days_past_retention_is_dropped_with_every_count_exact(
    pg_store: Store, redis_client: redis.Redis, keys: Keys
) -> None:
    store = pg_store
    store.retention.add_partitions(START.date(), END.date())
    sid = heartbeat_session(store, "CWEEK", EVERY, START)
    store.messages.accept_message(sid, "still waiting", now=START, idempotency_key="k-queued")
    stuck = heartbeat_session(store, "C-stuck", EVERY, START)
    stuck_run = start(store, stuck, 1, START + timedelta(hours=3))
    fill(store, sid, START, END, EVERY)
    assert _in_default(store.engine, "heartbeat_runs") == 0
    count = store.heartbeats.heartbeat_status(sid, END).state.fire_count  # type: ignore[union-attr]
    assert audit(store.ledger.audit_snapshot(), END).ok
    settings = Settings(retain_runs_days=KEEP_DAYS, retain_messages_days=KEEP_DAYS)
    beat = RetentionStep(store.retention, RetentionLease(redis_client, keys), settings)

    report = beat.step(to_ms(END))

    first = START.date()
    dropped = {first + timedelta(days=n) for n in range(1, 5)}  # wholly before the cutoff's day
    for table in ("heartbeat_runs", "messages"):
        days = _days(store.engine, table)
        assert not {day_name(table, d) for d in dropped} & days
        assert day_name(table, first) in days  # the stuck run's day (and the queued message's)
        assert day_name(table, END.date() + timedelta(days=3)) in days  # created ahead
    assert report.partitions >= 2 * len(dropped)  # and the empty days the migration made
    assert [r.id for r in store.ledger.runs(stuck)] == [stuck_run.id]
    runs = store.ledger.runs(sid)
    assert all(r.reserved_at >= END - timedelta(days=KEEP_DAYS) for r in runs)
    snapshot = store.ledger.audit_snapshot()
    assert audit(snapshot, END).ok
    [hb] = [h for h in snapshot.heartbeats if h.session_id == sid]
    assert hb.retired_runs == count - len(runs) == report.runs
    assert store.heartbeats.heartbeat_status(sid, END).state.fire_count == count  # type: ignore[union-attr]
    later = fire_once(store, sid, store.ledger.max_fence(sid) + 1, END + timedelta(seconds=EVERY))
    assert audit(store.ledger.audit_snapshot(), later).ok


def test_a_row_whose_day_has_no_partition_waits_in_the_default_and_moves_to_its_day(
    pg_store: Store,
) -> None:
    store = pg_store
    sid = heartbeat_session(store, "CFAR", EVERY, START)
    run = start(store, sid, 1, START + timedelta(seconds=EVERY))
    assert _in_default(store.engine, "heartbeat_runs") == 1
    assert _in_default(store.engine, "messages") == 1  # the turn's prompt
    day = run.due_at.date() if run.due_at else START.date()
    assert store.retention.add_partitions(day, day) == 2
    assert _in_default(store.engine, "heartbeat_runs") == 0
    assert day_name("heartbeat_runs", day) in _days(store.engine, "heartbeat_runs")
    assert [r.id for r in store.ledger.runs(sid)] == [run.id]
    later = START + timedelta(seconds=EVERY + 5)
    again = store.ledger.begin_fire(sid, 2, run.fire_id, 0, later, FireStart(1, lambda _: "p", 0))
    assert type(again.outcome).__name__ == "Duplicate"  # one run per fire id, whatever day


def test_the_fire_day_is_bound_to_the_fire_id(pg_store: Store) -> None:
    store = pg_store
    sid = heartbeat_session(store, "CCHECK", EVERY, START)
    run = start(store, sid, 1, START + timedelta(seconds=EVERY))
    with pytest.raises(IntegrityError), store.engine.begin() as conn:
        conn.execute(
            text("UPDATE heartbeat_runs SET fire_day = fire_day + 1 WHERE id = :id"),
            {"id": run.id},
        )


def _seed_0016(engine: Engine) -> None:
    at = datetime(2026, 1, 1)
    due_ms = to_ms(datetime.fromisoformat("2026-01-01T00:05:00+00:00"))
    statements = [
        "INSERT INTO sessions (id, platform, chat, status, conversation, fence, created_at,"
        " updated_at) VALUES ('s1', 'p', 'c', 'active', 1, 1, :at, :at)",
        "INSERT INTO heartbeats (session_id, prompt, status, anchor_at, set_at, fire_count,"
        " generation, origin_chat, created_at, updated_at, schedule_text)"
        " VALUES ('s1', 'p', 'active', :at, :at, 1, 1, 'c', :at, :at, '')",
        "INSERT INTO heartbeat_runs (fire_id, heartbeat_id, session_id, generation, fence, state,"
        " reserved_at, prev_anchor_at, deferred, missed) VALUES"
        f" ('s1:{due_ms}', 1, 's1', 1, 1, 'completed', :at, :at, false, 0)",
        "INSERT INTO messages (session_id, conversation, role, kind, text, state, created_at,"
        " idempotency_key) VALUES ('s1', 1, 'user', 'user', 'hi', 'done', :at, 'k1')",
        "INSERT INTO deliveries (run_id, session_id, channel, delivery_key, kind, fence, state,"
        " attempts, created_at, updated_at) VALUES (1, 's1', 'file', 'd1', 'heartbeat', 1,"
        " 'sent', 1, :at, :at)",
    ]
    with engine.begin() as conn:
        for sql in statements:
            conn.execute(text(sql), {"at": at})


ID_COLUMNS = {
    ("heartbeat_runs", "id"),
    ("messages", "id"),
    ("messages", "reply_to"),
    ("deliveries", "id"),
    ("deliveries", "run_id"),
    ("deliveries", "message_id"),
}


def _id_types(engine: Engine) -> set[str]:
    """The types of the ledger's id columns and of their sequences."""
    with engine.connect() as conn:
        columns = conn.execute(
            text(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema()"
            )
        ).all()
        sequences = conn.execute(
            text(
                "SELECT data_type FROM information_schema.sequences WHERE sequence_schema ="
                " current_schema() AND sequence_name IN ('heartbeat_runs_id_seq',"
                " 'messages_id_seq', 'deliveries_id_seq')"
            )
        ).scalars()
        kinds = {kind for table, column, kind in columns if (table, column) in ID_COLUMNS}
        return kinds | set(sequences)


def test_0017_converts_a_full_ledger_and_back(pg_schema_url: str) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine, "0016")
    _seed_0016(engine)
    assert _id_types(engine) == {"integer"}
    upgrade(engine)
    assert _id_types(engine) == {"bigint"}  # 32 bits last a week at 288 million runs a day
    store = Store(engine)
    [run] = store.ledger.runs("s1")
    assert run.fire_id.startswith("s1:") and run.delivery is not None
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT fire_day FROM heartbeat_runs_history")) == date(2026, 1, 1)
        assert conn.scalar(text("SELECT count(*) FROM messages_history")) == 1
    accepted = store.messages.accept_message("s1", "again", now=END, idempotency_key="k1")
    assert accepted.duplicate  # the key still finds the moved message
    assert audit(store.ledger.audit_snapshot(), END).ok
    downgrade(engine, "0016")
    assert _id_types(engine) == {"integer"}
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM heartbeat_runs")) == 1
        assert conn.scalar(text("SELECT count(*) FROM messages")) == 1
        assert conn.scalar(text("SELECT to_regclass('heartbeat_runs_default')")) is None
    engine.dispose()
