"""On PostgreSQL every lookup of a run or a message by its id (or a run by its fire id) that
the fire path (a heartbeat's and a cron job's) and a user turn make reads one day partition,
not every day's index (migration 0017; ``ledger_sql.py``, ``job_sql.py``): the statements the
store really sends are captured while a fire, a cron job's run and a user turn go through their
production steps with many day partitions present, and each is explained — with its parameters
bound (the plan of a first execution) and as a generic plan (what a prepared statement gets
after a few) — and the partitions in its plan are counted.
Structural, not timed. Also: ids past 32 bits go through the fire path (64-bit ids)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, event, text
from support.fires import begin, due_fire, start
from support.ledger_week import fire_once, heartbeat_session

from hbgw.core.clock import to_ms
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.states import DeliveryState, RefundReason, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import (
    DeliveryOutcome,
    FireStart,
    JobNotStarted,
    JobRoute,
    JobStart,
    JobStarted,
    NewJob,
    Outbound,
    Started,
)

pytestmark = pytest.mark.postgres

NOW = datetime.fromisoformat("2027-05-10T12:00:00+00:00")
EVERY = 3600
PARTITIONED = ("heartbeat_runs", "messages")
# A lookup by id (or a run by its fire id): what must read one partition.
BY_ID = re.compile(r"\b(heartbeat_runs|messages)\.(id|fire_id) (=|IN)")
PARAM = re.compile(r"%\((\w+)\)s")


@dataclass(frozen=True)
class Sent:
    statement: str
    parameters: dict[str, Any]


@pytest.fixture
def pg_store(pg_schema_url: str) -> Iterator[Store]:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    store = Store(engine)
    store.retention.add_partitions(
        (NOW - timedelta(days=10)).date(), (NOW + timedelta(days=3)).date()
    )
    yield store
    engine.dispose()


def _capture(engine: Engine, into: list[Sent]) -> Any:
    def sent(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        if BY_ID.search(statement) and not statement.lstrip().startswith("INSERT"):
            into.append(Sent(statement, dict(parameters)))

    event.listen(engine, "before_cursor_execute", sent)
    return sent


def _partitions(plan: dict[str, Any]) -> set[str]:
    """The partitions of the two tables that ``plan`` (EXPLAIN's JSON node) reads."""
    found = set()
    name = plan.get("Relation Name", "")
    if any(name.startswith(f"{table}_") for table in PARTITIONED):
        found.add(name)
    for child in plan.get("Plans", []):
        found |= _partitions(child)
    return found


def _custom_plan(engine: Engine, sent: Sent) -> set[str]:
    with engine.connect() as conn:
        raw = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sent.statement, sent.parameters)
        return _partitions(_plan_of(raw.scalar()))


def _generic_plan(engine: Engine, sent: Sent) -> set[str]:
    """The plan PostgreSQL keeps for a prepared statement (``force_generic_plan``): the
    partitions left after its pruning at the executor's start."""
    names = list(dict.fromkeys(PARAM.findall(sent.statement)))
    numbered = PARAM.sub(lambda m: f"${names.index(m.group(1)) + 1}", sent.statement)
    values = ", ".join(f"%({n})s" for n in names)
    raw = engine.raw_connection()
    try:
        # Bound on the client, as literals: the prepared statement gives them their types.
        assert isinstance(raw.driver_connection, psycopg.Connection)
        cursor = psycopg.ClientCursor(raw.driver_connection)
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE lookup AS {numbered}")
        cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE lookup({values})", sent.parameters)
        row = cursor.fetchone()
        assert row is not None
        plan = _plan_of(row[0])
        cursor.execute("DEALLOCATE lookup")
        raw.rollback()  # the SET with it
    finally:
        raw.close()
    return _partitions(plan)


def _plan_of(value: Any) -> dict[str, Any]:
    explained = json.loads(value) if isinstance(value, str) else value
    return dict(explained[0]["Plan"])


def _fire_and_user_turn(store: Store) -> None:
    """A fire's production steps (admission, the begin and its repeat,
    the delivering mark, the finish and its repeat), a refund and a lost turn's settlement,
    and a user turn's mark, take-back and reply."""
    sid = heartbeat_session(store, "CHOT", EVERY, NOW - timedelta(hours=2))
    fid, due_ms = due_fire(store, sid, NOW)
    store.ledger.admit_fires([(sid, fid)])
    first = FireStart(1, lambda _state: "p", 20, worker="w1")
    for _ in range(2):  # the second: a repeat after a lost COMMIT, the prompt read back
        begun = store.ledger.begin_fire(sid, 1, fid, due_ms, NOW, first).outcome
        assert isinstance(begun, Started), begun
    assert isinstance(begun, Started)
    run = begun.run
    store.ledger.mark_delivering(run.key, 1, NOW, channel="file", kind="heartbeat")
    sent = DeliveryOutcome(fid, DeliveryState.SENT, platform_message_id="1")
    for _ in range(2):  # the second: a repeat
        store.ledger.finish_fire(
            run.key, RunState.COMPLETED, 1, NOW, reply="ok", reply_kind="assistant",
            delivered=sent, channel="file",
        )  # fmt: skip
    other = heartbeat_session(store, "C-refund", EVERY, NOW - timedelta(hours=2))
    begin(store, other, 1, NOW, refusal=RefundReason.LOCK_LOST)  # written refunded at once
    lost = heartbeat_session(store, "C-lost", EVERY, NOW - timedelta(hours=2))
    store.ledger.settle_lost(start(store, lost, 1, NOW).key, 1, NOW)
    message = store.messages.accept_message(sid, "hello", now=NOW, idempotency_key="k1").message
    store.ledger.claim_fence(sid, 2, NOW)
    reply = [Outbound(f"msg:{message.id}", "reply")]
    store.ledger.begin_reply(sid, message.key, 2, NOW, channel="file", outbound=reply)
    store.ledger.drop_reply_mark(message.key, 2, None, NOW, unsent=[], nothing_sent=True)
    store.messages.add_message(
        sid, role="assistant", kind="assistant", text="hi", reply_to=message.key, now=NOW,
        fence=2,
    )  # fmt: skip


def _job_due(store: Store, chat: str) -> tuple[str, str, str, int]:
    """A cron job of a session, set two hours ago every hour on its exact times: due now."""
    set_at = NOW - timedelta(hours=2)
    sid = store.sessions.create_session(platform="cli", chat=chat, thread=None, now=set_at).id
    parsed = parse_job_schedule("every 1h", now=set_at, min_interval=60)
    new = NewJob(parsed, "every 1h exact", "p", JobRoute(session_id=sid))
    job = store.jobs.create_job(new, set_at)
    assert job.next_due is not None
    due_ms = to_ms(job.next_due)
    return sid, job.id, f"job:{job.id}:{due_ms}", due_ms


def _cron_job_turns(store: Store) -> None:
    """A cron job's production steps: admission, the begin and its repeat, the mark, the
    finish and its repeat; a begin given back at once; a run given back to the retry ladder,
    and its repeat."""
    sid, jid, fid, due_ms = _job_due(store, "C-job")
    store.jobs.admit_jobs([(jid, fid)])
    start = JobStart(1, lambda _job: "p", 20, worker="w1")
    for _ in range(2):  # the second: a repeat after a lost COMMIT, the prompt read back
        begun = store.jobs.begin_job_fire(sid, 1, jid, fid, due_ms, NOW, start).outcome
        assert isinstance(begun, JobStarted), begun
    assert isinstance(begun, JobStarted)
    store.ledger.mark_delivering(begun.run.key, 1, NOW, channel="file", kind="heartbeat")
    sent = DeliveryOutcome(fid, DeliveryState.SENT, platform_message_id="1")
    for _ in range(2):  # the second: a repeat
        store.jobs.finish_job_fire(
            begun.run.key, RunState.COMPLETED, 1, NOW, reply="ok", reply_kind="assistant",
            delivered=sent, channel="file",
        )  # fmt: skip
    sid, jid, fid, due_ms = _job_due(store, "C-job-refund")
    lost = JobStart(1, lambda _job: "p", 20, refusal=RefundReason.LOCK_LOST)
    refunded = store.jobs.begin_job_fire(sid, 1, jid, fid, due_ms, NOW, lost).outcome
    assert isinstance(refunded, JobNotStarted), refunded  # written refunded at once
    sid, jid, fid, due_ms = _job_due(store, "C-job-retry")
    retried = store.jobs.begin_job_fire(sid, 1, jid, fid, due_ms, NOW, start).outcome
    assert isinstance(retried, JobStarted), retried
    for _ in range(2):  # the second: a repeat
        store.jobs.retry_job_fire(
            retried.run.key, 1, NOW, detail="model unreachable", notice="n", usage=None,
            retry_at=NOW + timedelta(minutes=1),
        )  # fmt: skip


def test_every_lookup_by_id_reads_one_partition(pg_store: Store) -> None:
    engine = pg_store.engine
    with engine.connect() as conn:
        days = conn.scalar(text("SELECT count(*) FROM pg_inherits"))
    assert days is not None and days >= 2 * 14  # both tables, a fortnight of days each
    lookups: list[Sent] = []
    listener = _capture(engine, lookups)
    try:
        _fire_and_user_turn(pg_store)
        _cron_job_turns(pg_store)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    shapes = {re.sub(r"\s+", " ", s.statement) for s in lookups}
    assert len(shapes) >= 8, shapes  # the run's fenced read, start, mark, finish, by fire id, ...
    for sent in lookups:
        for plan in (_custom_plan, _generic_plan):
            read = plan(engine, sent)
            assert len(read) == 1, f"{plan.__name__}: {sorted(read)}\n{sent.statement}"


def test_ids_past_32_bits_go_through_the_fire_path(pg_store: Store) -> None:
    """Runs, messages and deliveries are 64-bit ids, and so are their sequences."""
    with pg_store.engine.begin() as conn:
        for table in ("heartbeat_runs", "messages", "deliveries"):
            conn.exec_driver_sql(f"ALTER SEQUENCE {table}_id_seq RESTART WITH 5000000000")
    sid = heartbeat_session(pg_store, "CBIG", EVERY, NOW - timedelta(hours=2))
    fire_once(pg_store, sid, 1, NOW)
    [run] = pg_store.ledger.runs(sid)
    assert run.id > 2**32 and run.state == RunState.COMPLETED
    assert run.delivery is not None and run.delivery.state == DeliveryState.SENT
    assert all(m.id > 2**32 for m in pg_store.messages.list_messages(sid))
