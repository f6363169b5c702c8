"""The cost of the fire path, counted on real Redis and real SQL (SQLite and PostgreSQL):
transactions and statements per admission and per heartbeat turn, and Redis round trips per
admission, per heartbeat turn and per user turn. Counts, never times: a change that adds a
round trip to every fire fails here.

Before the fire path was folded (issue 10): 3 transactions per admission, 12 per turn (claim,
reserve, re-read heartbeat, session, mark started, prompt, history, delivering, reply, finish,
and settle's two reads); then 4 (the claim and reservation, then the re-check and start). Now:
admission reads once; a turn claims, reserves, re-checks and starts in one (``begin_fire``),
marks delivering, and finishes with its reply and next due time in one. A cron job's turn costs
the same (``begin_job_fire``; before: 4 transactions, 24 statements and 9 round trips, 3, 21 and
7 silent — the claim and the reservation, then the re-check and start, through the ORM; the
re-check's reads, the start stamp, the wake, the index write and the idle stamp one round trip
each); a routed job's too, its fresh session made by the begin (one statement more), its
admission the heartbeat's one transaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.broker import take_messages
from support.fire_path import FireCost, fire_path_gateway
from support.jobs import add_job, ago
from support.scenarios import assert_invariants, send

from hbgw.gateway.inbound import Queued
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.states import RunState, job_member
from hbgw.sessions.store.job_turns import run_session_id
from hbgw.state.ownership import rendezvous_owner

ADMISSION_TRANSACTIONS = 1
TURN_TRANSACTIONS = 3  # claim + reserve + re-check + start, delivering, finish
SILENT_TURN_TRANSACTIONS = 2  # nothing is delivered: no delivering step
# Statements too (before: 4 per admission, 32 per turn, then 21), so no step reads again what it
# read; every fenced step reads its run with its session's fence in one Core statement, the
# begin writes the run started in its INSERT, and the finish writes its heartbeat in one UPDATE
# (ledger_sql.py).
# The delivery record costs no transaction: one INSERT with the mark, one UPDATE with the
# finish (a silent turn: one INSERT, suppressed, with the finish).
ADMISSION_STATEMENTS = 3
TURN_STATEMENTS = 18
SILENT_TURN_STATEMENTS = 15
# A user turn: claim the fence; the message, its session and the history in one
# (``message_turn``); the mark with its pending delivery records; the reply with its delivery's
# outcome and the message marked done (before: 6, the three reads one each).
USER_TURN_TRANSACTIONS = 4
# Redis round trips of the worker's client (a pipeline is one), counted on a real Redis at its
# connections (support.redis_count): admission reads the live workers; a heartbeat turn takes
# the lock with the re-check's emergency stop and owner read in the same round trip
# (``turn_redis.begin_fire``), stamps delivering with the lock's confirmation, and ends with
# one step (next_step.lua): the finish's wake, due time and idle stamp, the estop, the inbox and
# the end of the turn; a silent turn has no confirmation: 2. The start and the agent's phase
# are held stamps: they ride on the turn's next round trip, or the lock renewals' (before: 11
# with the admission, 10 silent, 16 per user turn; then 8, 7 and 11; then 4, 3 and 4). A user
# turn: the drain's owner, backlog and estop in one; the lock with its first message; the
# confirmation; the step with the reply's wake-up, the idle stamp and the answer's ack.
ADMISSION_REDIS = 1
TURN_REDIS = 3
SILENT_TURN_REDIS = 2
USER_TURN_REDIS = 4
BATCH = 10  # fires in one task
# A cron job's turn in an existing session, step for step a heartbeat's: admission reads the
# batch's jobs, sessions and runs (three statements); the begin claims, reserves, re-checks and
# starts in one transaction (``begin_job_fire``), with the lock's round trip reading the
# emergency stop and the owner (``turn_redis.begin_job``); the mark; the finish, its index write
# and idle stamp riding the drain's next step.
JOB_ADMISSION_STATEMENTS = 3
JOB_TURN_TRANSACTIONS = 3
SILENT_JOB_TURN_TRANSACTIONS = 2
JOB_TURN_STATEMENTS = 18
# A routed job's run goes to a fresh session: admission knows its id from the fire id and reads
# nothing more; the begin makes it before its claim, in its own transaction (one INSERT ... ON
# CONFLICT DO NOTHING, ``job_sql.RUN_SESSION``). Before: a second transaction at admission,
# through the ORM (2 transactions and 6 statements, the session's read, the job's, the INSERT).
ROUTED_JOB_TURN_STATEMENTS = JOB_TURN_STATEMENTS + 1
SILENT_JOB_TURN_STATEMENTS = 15
JOB_TURN_REDIS = 3
SILENT_JOB_TURN_REDIS = 2


def _one_fire(tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object) -> FireCost:
    with fire_path_gateway(tmp_path, redis_url, redis_ns, **overrides) as (gw, path):
        sid = gw.session()
        gw.due_now(sid)
        cost = path.fire(sid)
        [run] = gw.runs(sid)
        silent = bool(overrides.get("echo_silent_heartbeats"))
        assert run.state == (RunState.SILENT if silent else RunState.COMPLETED)
        assert_invariants(gw)
    return cost


def _check(cost: FireCost, turn: int, statements: int, redis_trips: int) -> None:
    assert cost.admission.transactions >= 1 and cost.turn.transactions >= 2  # it counts at all
    assert cost.turn_redis.round_trips >= 2  # Redis counts at all: the lock, the end
    lines = "\n".join(cost.turn.lines)
    trips = cost.turn_redis
    assert cost.admission_redis.round_trips <= ADMISSION_REDIS, cost.admission_redis.lines
    assert trips.round_trips <= redis_trips, f"{trips.round_trips} round trips:\n{trips.lines}"
    assert cost.admission.transactions <= ADMISSION_TRANSACTIONS, cost.admission.lines
    assert cost.turn.transactions <= turn, f"{cost.turn.transactions} transactions:\n{lines}"
    assert cost.admission.statements <= ADMISSION_STATEMENTS, cost.admission.lines
    assert cost.turn.statements <= statements, f"{cost.turn.statements} statements:\n{lines}"
    assert cost.admission.rollbacks == cost.turn.rollbacks == 0


def test_sql_round_trips_per_fire_on_sqlite(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    _check(_one_fire(tmp_path, redis_url, redis_ns), TURN_TRANSACTIONS, TURN_STATEMENTS, TURN_REDIS)


def test_silent_turn_costs_one_transaction_and_round_trip_less(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    cost = _one_fire(tmp_path, redis_url, redis_ns, echo_silent_heartbeats=True)
    _check(cost, SILENT_TURN_TRANSACTIONS, SILENT_TURN_STATEMENTS, SILENT_TURN_REDIS)


@pytest.mark.postgres
def test_sql_round_trips_per_fire_on_postgres(
    tmp_path: Path, redis_url: str, redis_ns: str, pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    engine.dispose()
    cost = _one_fire(tmp_path, redis_url, redis_ns, database_url=pg_schema_url)
    _check(cost, TURN_TRANSACTIONS, TURN_STATEMENTS, TURN_REDIS)


def test_a_batch_of_fires_is_admitted_in_one_transaction(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """A task carries a worker's share of a tick: its fires are read in one transaction, not
    one each (issue 16: admission batched)."""
    with fire_path_gateway(tmp_path, redis_url, redis_ns) as (gw, path):
        sids = [gw.session(chat=f"C{i}") for i in range(BATCH)]
        for sid in sids:
            gw.due_now(sid)
        admission = path.admit_batch(sids)
        assert {r.session_id for r in gw.runs() if r.state == RunState.COMPLETED} == set(sids)
        assert_invariants(gw)
    assert admission.transactions == ADMISSION_TRANSACTIONS, admission.lines
    # Three statements for the whole batch (sessions, runs, heartbeats: an expanding IN each).
    assert admission.statements <= ADMISSION_STATEMENTS, admission.lines
    assert admission.rollbacks == 0


def test_a_batch_forwards_the_fires_of_other_owners_in_one_message_each(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """Sessions a batch finds owned by another live worker go to that worker's queue, all of
    them in one message; the rest run here."""
    with fire_path_gateway(tmp_path, redis_url, redis_ns) as (gw, path):
        path.rt.registry.refresh("w2", path.rt.now_ms())
        live = path.rt.registry.live(path.rt.now_ms())
        # Session ids are random: sessions are added until both workers own some (ten all on
        # one side happens once in 512).
        sids: list[str] = []
        while len(sids) < BATCH or len({rendezvous_owner(s, live) for s in sids}) < 2:
            sids.append(gw.session(chat=f"C{len(sids)}"))
        for sid in sids:
            gw.due_now(sid)
        theirs = [s for s in sids if rendezvous_owner(s, live) == "w2"]
        ours = [s for s in sids if s not in theirs]
        assert theirs and ours, "ten sessions over two workers: both get some"
        due = [(sid, path.due_ms(sid)) for sid in sids]
        outcomes = path.runner.accept_fires(due)
        path.wait_idle()
        assert [o for o, s in zip(outcomes, sids, strict=True) if s in theirs] == [
            "forwarded"
        ] * len(theirs)
        messages = take_messages(gw.app, gw.rt.keys.worker_queue("w2"))
        assert [[tuple(f) for f in args[0]] for _task, args in messages] == [
            [d for d in due if d[0] in theirs]
        ]
        assert {r.session_id for r in gw.runs()} == set(ours)


def test_user_turn_transactions(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    with fire_path_gateway(tmp_path, redis_url, redis_ns) as (gw, path):
        sid = gw.session()
        queued = send(gw, sid, "hello")
        assert isinstance(queued, Queued)
        cost = path.drain(sid)
        assert gw.store.messages.reply_for(queued.message_id) is not None
    sql, trips = cost.sql, cost.redis
    lines = "\n".join(sql.lines)
    assert 1 <= sql.transactions <= USER_TURN_TRANSACTIONS, f"{sql.transactions}:\n{lines}"
    assert sql.rollbacks == 0
    assert 3 <= trips.round_trips <= USER_TURN_REDIS, f"{trips.round_trips}:\n{trips.lines}"


def _one_job_fire(tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object) -> FireCost:
    with fire_path_gateway(tmp_path, redis_url, redis_ns, **overrides) as (gw, path):
        sid = gw.session()
        job = add_job(gw, "every 1m", session=sid, set_at=ago(61))
        cost = path.fire(job_member(job.id))
        [run] = gw.store.jobs.job_runs(job.id)
        silent = bool(overrides.get("echo_silent_heartbeats"))
        assert run.state == (RunState.SILENT if silent else RunState.COMPLETED), run
        assert run.session_id == sid and gw.store.jobs.job(job.id).state.fire_count == 1
        assert gw.rt.index.due_ms(job_member(job.id)) is not None  # due again, from the finish
        assert_invariants(gw)
    return cost


def _check_job(cost: FireCost, turn: int, statements: int, redis_trips: int) -> None:
    lines, trips = "\n".join(cost.turn.lines), cost.turn_redis
    assert cost.turn.transactions >= 2 and trips.round_trips >= 2  # it counts at all
    assert cost.admission.transactions <= ADMISSION_TRANSACTIONS, cost.admission.lines
    assert cost.admission.statements <= JOB_ADMISSION_STATEMENTS, cost.admission.lines
    assert cost.admission_redis.round_trips <= ADMISSION_REDIS, cost.admission_redis.lines
    assert cost.turn.transactions <= turn, f"{cost.turn.transactions} transactions:\n{lines}"
    assert cost.turn.statements <= statements, f"{cost.turn.statements} statements:\n{lines}"
    assert trips.round_trips <= redis_trips, f"{trips.round_trips} round trips:\n{trips.lines}"
    assert cost.admission.rollbacks == cost.turn.rollbacks == 0


def test_a_cron_job_turn_costs_what_a_heartbeat_turn_costs_on_sqlite(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    cost = _one_job_fire(tmp_path, redis_url, redis_ns)
    _check_job(cost, JOB_TURN_TRANSACTIONS, JOB_TURN_STATEMENTS, JOB_TURN_REDIS)


def test_a_silent_cron_job_turn_costs_one_transaction_and_round_trip_less(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    cost = _one_job_fire(tmp_path, redis_url, redis_ns, echo_silent_heartbeats=True)
    _check_job(
        cost, SILENT_JOB_TURN_TRANSACTIONS, SILENT_JOB_TURN_STATEMENTS, SILENT_JOB_TURN_REDIS
    )


@pytest.mark.postgres
def test_a_cron_job_turn_costs_what_a_heartbeat_turn_costs_on_postgres(
    tmp_path: Path, redis_url: str, redis_ns: str, pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    engine.dispose()
    cost = _one_job_fire(tmp_path, redis_url, redis_ns, database_url=pg_schema_url)
    _check_job(cost, JOB_TURN_TRANSACTIONS, JOB_TURN_STATEMENTS, JOB_TURN_REDIS)


def _one_routed_job_fire(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> FireCost:
    with fire_path_gateway(tmp_path, redis_url, redis_ns, **overrides) as (gw, path):
        job = add_job(gw, "every 1m", set_at=ago(61))
        cost = path.fire(job_member(job.id))
        [run] = gw.store.jobs.job_runs(job.id)
        assert run.state == RunState.COMPLETED, run
        fresh = gw.store.sessions.get_session(run.session_id)
        assert fresh.id == run_session_id(run.fire_id)
        assert (fresh.platform, fresh.chat, fresh.thread) == ("slack", "CJ", None)
        assert gw.rt.index.due_ms(job_member(job.id)) is not None
        assert_invariants(gw)
    return cost


def test_a_routed_job_turn_makes_its_session_in_its_begin_on_sqlite(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    cost = _one_routed_job_fire(tmp_path, redis_url, redis_ns)
    _check_job(cost, JOB_TURN_TRANSACTIONS, ROUTED_JOB_TURN_STATEMENTS, JOB_TURN_REDIS)


@pytest.mark.postgres
def test_a_routed_job_turn_makes_its_session_in_its_begin_on_postgres(
    tmp_path: Path, redis_url: str, redis_ns: str, pg_schema_url: str
) -> None:
    engine = make_engine(pg_schema_url)
    upgrade(engine)
    engine.dispose()
    cost = _one_routed_job_fire(tmp_path, redis_url, redis_ns, database_url=pg_schema_url)
    _check_job(cost, JOB_TURN_TRANSACTIONS, ROUTED_JOB_TURN_STATEMENTS, JOB_TURN_REDIS)
