"""SQL bytes, rows and statements per heartbeat fire on PostgreSQL, and what retention deletes.

N fires of S heartbeats go through the store's production steps, as a worker takes them: the
claim at the lock grant, the start (the prompt stored as a message), the fenced delivery mark
(the pending delivery record) and the finish (the reply with its tokens, the record ``sent``).
``pg_total_relation_size`` of each table (heap, indexes, TOAST; summed over its partitions) is
read before and after; the SQL statements and transactions are counted on the engine; WAL
bytes are the server's LSN moved (the server may be shared: an upper bound). From the per-fire
figures: the write rate of 1,000 sessions at 5-minute heartbeats, and the table size a
retention window holds. Then retention deletes every run and message in batches, timed: the
rows per second one beat replica clears.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from bench.context import BenchContext, Result
from bench.e2e_systems import postgres_schema
from hbgw.core.clock import to_ms
from hbgw.core.usage import TokenUsage
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.states import DeliveryState, RunState, fire_id
from hbgw.sessions.store import Store
from hbgw.sessions.views import DeliveryOutcome, FireStart, Started

NAME = "ledger_size"
TABLES = ("heartbeat_runs", "deliveries", "messages", "heartbeats", "sessions")
INTERVAL_S = 300  # the 5-minute heartbeat of the write-rate figure
FLEET = 1000  # sessions of the write-rate figure
RETAIN_DAYS = (1, 7, 30)
BATCH = 1000
T0 = datetime(2026, 12, 1, tzinfo=UTC)
USAGE = TokenUsage(prompt_tokens=900, completion_tokens=120, model="m")
REPLY = "All green: 3 pipelines passed, nothing needs you."  # a typical short heartbeat reply


@dataclass
class Counter:
    statements: int = 0
    transactions: int = 0

    def attach(self, engine: sa.Engine) -> None:
        sa.event.listen(engine, "before_cursor_execute", self._statement)
        sa.event.listen(engine, "commit", self._commit)

    def _statement(self, *_: Any) -> None:
        self.statements += 1

    def _commit(self, *_: Any) -> None:
        self.transactions += 1


def run(ctx: BenchContext) -> Result:
    if ctx.pg_url is None:
        ctx.note("ledger_size: PostgreSQL not reachable; skipped")
        return {"skipped": "PostgreSQL not reachable"}
    sessions, fires = (20, 400) if ctx.quick else (100, 5000)
    return measure(ctx.pg_url, sessions=sessions, fires=fires)


def measure(pg_url: str, *, sessions: int, fires: int) -> Result:
    with ExitStack() as stack:
        url = postgres_schema(stack, pg_url)
        engine = make_engine(url)
        stack.callback(engine.dispose)
        upgrade(engine)
        store = Store(engine)
        store.retention.add_partitions(T0.date(), T0.date() + timedelta(days=1))  # the fires' days
        sids = [_heartbeat(store, i) for i in range(sessions)]
        before, wal_before = _sizes(engine), _wal(engine)
        counter = Counter()
        counter.attach(engine)
        started = time.perf_counter()
        for n in range(fires):
            _fire(store, sids[n % sessions], n // sessions + 1)
        seconds = time.perf_counter() - started
        after, wal_after = _sizes(engine), _wal(engine)
        figures = _per_fire(before, after, fires)
        figures.update(
            fires=fires,
            sessions=sessions,
            statements_per_fire=round(counter.statements / fires, 2),
            transactions_per_fire=round(counter.transactions / fires, 2),
            wal_bytes_per_fire=round((wal_after - wal_before) / fires),
            fires_per_second_one_connection=round(fires / seconds, 1),
        )
        figures["fleet"] = _fleet(figures)
        figures["retention"] = _retire_all(store, fires)
        return figures


def _heartbeat(store: Store, i: int) -> str:
    sid = store.sessions.create_session(platform="slack", chat=f"C{i}", thread=None, now=T0).id
    store.heartbeats.set_heartbeat(
        sid,
        schedule=IntervalSchedule(seconds=INTERVAL_S),
        schedule_text="every 5m",
        prompt="Check CI and tell me what broke.",
        now=T0,
    )
    return sid


def _fire(store: Store, sid: str, fence: int) -> None:
    """The n-th fire of ``sid`` (fence n), at its due time; every step a production one."""
    due = T0 + timedelta(seconds=INTERVAL_S * fence + fence)  # each a second later than due
    fid = fire_id(sid, to_ms(due))
    start = FireStart(1, lambda _state: "Check CI and tell me what broke.", 0, worker="bench")
    begun = store.ledger.begin_fire(sid, fence, fid, to_ms(due), due, start).outcome
    assert isinstance(begun, Started), begun
    run_key = begun.run.key
    store.ledger.mark_delivering(run_key, fence, due, channel="slack", kind="heartbeat")
    sent = DeliveryOutcome(fid, DeliveryState.SENT, platform_message_id=f"1700000000.{fence:06d}")
    done = due + timedelta(seconds=2)
    store.ledger.finish_fire(
        run_key,
        RunState.COMPLETED,
        fence,
        done,
        reply=REPLY,
        reply_kind="assistant",
        usage=USAGE,
        delivered=sent,
        channel="slack",
    )


def _sizes(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    """Each table's (rows, bytes with indexes and TOAST)."""
    out = {}
    with engine.connect() as conn:
        for table in TABLES:
            rows = conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
            size = conn.execute(
                # A partitioned table's own size is 0: its partitions hold the rows (0017). A
                # plain table has no partition tree (no rows): its own size.
                sa.text(
                    "SELECT coalesce((SELECT sum(pg_total_relation_size(relid))"
                    " FROM pg_partition_tree(CAST(:t AS regclass))),"
                    " pg_total_relation_size(CAST(:t AS regclass)))"
                ),
                {"t": table},
            ).scalar_one()
            out[table] = (int(rows), int(size))
    return out


def _wal(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        lsn = conn.execute(sa.text("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")).scalar_one()
    return int(lsn)


def _per_fire(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], fires: int
) -> dict[str, Any]:
    tables = {
        t: {
            "rows_per_fire": round((after[t][0] - before[t][0]) / fires, 3),
            "bytes_per_fire": round((after[t][1] - before[t][1]) / fires),
        }
        for t in TABLES
    }
    return {
        "tables": tables,
        "rows_per_fire": round(sum(v["rows_per_fire"] for v in tables.values()), 3),
        "bytes_per_fire": sum(v["bytes_per_fire"] for v in tables.values()),
    }


def _fleet(figures: dict[str, Any]) -> dict[str, Any]:
    """What 1,000 sessions at 5-minute heartbeats write, and what a retention window holds."""
    fires_per_second = FLEET / INTERVAL_S
    per_day = fires_per_second * 86400
    kept = figures["tables"]["heartbeat_runs"]["bytes_per_fire"]
    kept += figures["tables"]["deliveries"]["bytes_per_fire"]
    kept += figures["tables"]["messages"]["bytes_per_fire"]
    return {
        "sessions": FLEET,
        "interval_s": INTERVAL_S,
        "fires_per_second": round(fires_per_second, 3),
        "sql_transactions_per_second": round(
            fires_per_second * figures["transactions_per_fire"], 1
        ),
        "sql_statements_per_second": round(fires_per_second * figures["statements_per_fire"], 1),
        "rows_inserted_per_second": round(fires_per_second * figures["rows_per_fire"], 1),
        "table_bytes_per_day": round(per_day * figures["bytes_per_fire"]),
        "wal_bytes_per_second": round(fires_per_second * figures["wal_bytes_per_fire"]),
        "retained_bytes": {f"{d}d": round(per_day * d * kept) for d in RETAIN_DAYS},
    }


def _retire_all(store: Store, fires: int) -> dict[str, Any]:
    """Retention with a cutoff past every row: batches of ``BATCH``, timed."""
    cutoff = T0 + timedelta(days=3650)
    started = time.perf_counter()
    runs = _drain(lambda: store.retention.retire_runs(cutoff, BATCH))
    run_seconds = time.perf_counter() - started
    started = time.perf_counter()
    messages = _drain(lambda: store.retention.retire_messages(cutoff, BATCH))
    message_seconds = time.perf_counter() - started
    return {
        "batch": BATCH,
        "runs_deleted": runs,
        "runs_per_second": round(runs / run_seconds) if run_seconds else None,
        "messages_deleted": messages,
        "messages_per_second": round(messages / message_seconds) if message_seconds else None,
        # The newest row of each table is kept (ids must only grow), and so is its fire's.
        "runs_left": fires - runs,
    }


def _drain(batch: Any) -> int:
    total = 0
    while n := batch():
        total += n
    return total
