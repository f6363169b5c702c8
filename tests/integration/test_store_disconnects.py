"""Issue 7, defect 5: database drops. Real `pg_terminate_backend` of the store's connections
(the PostgreSQL tests; the one of a repeat after a saved COMMIT runs on every backend).

A transaction that failed before COMMIT was rolled back by the server and is repeated; a
failure during COMMIT is ambiguous, so only operations that are safe to repeat (``finish_fire``,
``begin_fire``, a cron job's ``begin_job_fire`` and ``finish_job_fire``) are repeated after
one; every other raw error leaves the store as a ``StoreError`` with one sentence.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from support.fires import finish, start
from support.seed import T0
from support.sql_fixtures import PG_URL

from hbgw.core.clock import to_ms
from hbgw.core.errors import OutcomeUnknown, StoreError
from hbgw.sessions.db import make_engine, upgrade
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.states import RefundReason, RunState
from hbgw.sessions.store import Store
from hbgw.sessions.views import (
    FireStart,
    JobNotStarted,
    JobRoute,
    JobStart,
    JobStarted,
    NewJob,
    RunKey,
    Started,
)


@pytest.fixture
def app_name() -> str:
    return "hbgw-test-" + uuid.uuid4().hex[:8]


@pytest.fixture
def pg_store(pg_schema_url: str, app_name: str) -> Iterator[Store]:
    engine = make_engine(f"{pg_schema_url}&application_name={app_name}")
    upgrade(engine)
    yield Store(engine)
    engine.dispose()


@pytest.fixture
def admin() -> Iterator[Engine]:
    engine = create_engine(PG_URL)
    yield engine
    engine.dispose()


def terminate(admin: Engine, *, app_name: str | None = None, pid: int | None = None) -> int:
    """pg_terminate_backend of the store's connections (by application name) or of one pid."""
    with admin.begin() as conn:
        if pid is not None:
            return int(
                conn.execute(text("SELECT pg_terminate_backend(:p)::int"), {"p": pid}).scalar_one()
            )
        query = (
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = :a"
        )
        return int(conn.execute(text(query), {"a": app_name}).scalar_one())


def kill_own_backend(
    engine: Engine, admin: Engine, event_name: str, times: int
) -> Callable[[], int]:
    """Terminate the backend of the connection that is about to run a statement (or COMMIT),
    ``times`` times; returns a counter of what was done."""
    done = [0]

    def hook(conn: Any, *_: Any) -> None:
        if done[0] >= times:
            return
        done[0] += 1
        pid = conn.connection.dbapi_connection.info.backend_pid
        terminate(admin, pid=pid)

    event.listen(engine, event_name, hook)
    return lambda: done[0]


def started_run(store: Store) -> tuple[RunKey, int]:
    """A session with a heartbeat and one run started at fence 1: (run key, fence)."""
    sid = store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0).id
    store.heartbeats.set_heartbeat(
        sid, schedule=IntervalSchedule(60), schedule_text="every 60s", prompt="p", now=T0
    )
    now = T0 + timedelta(seconds=61)
    run = start(store, sid, 1, now)
    return run.key, 1


def final_state(store: Store) -> RunState:
    [run] = store.ledger.runs()
    return run.state


@pytest.mark.postgres
def test_idle_connections_terminated_between_calls_are_replaced(
    pg_store: Store, admin: Engine, app_name: str
) -> None:
    run_id, fence = started_run(pg_store)
    assert terminate(admin, app_name=app_name) >= 1
    run = finish(pg_store, run_id, RunState.COMPLETED, fence, T0 + timedelta(seconds=70))
    assert run.state == RunState.COMPLETED


@pytest.mark.postgres
def test_a_transaction_cut_before_commit_is_repeated(pg_store: Store, admin: Engine) -> None:
    run_id, fence = started_run(pg_store)
    killed = kill_own_backend(pg_store.engine, admin, "before_cursor_execute", times=1)
    run = finish(pg_store, run_id, RunState.COMPLETED, fence, T0 + timedelta(seconds=70))
    assert killed() == 1
    assert run.state == RunState.COMPLETED
    assert final_state(pg_store) == RunState.COMPLETED


@pytest.mark.postgres
def test_finish_is_repeated_after_a_commit_cut_off(pg_store: Store, admin: Engine) -> None:
    """The outcome of a run is known: it reaches its final state even if COMMIT was cut."""
    run_id, fence = started_run(pg_store)
    killed = kill_own_backend(pg_store.engine, admin, "commit", times=1)
    finish(pg_store, run_id, RunState.COMPLETED, fence, T0 + timedelta(seconds=70))
    assert killed() == 1
    assert final_state(pg_store) == RunState.COMPLETED


@pytest.mark.postgres
def test_other_writes_cut_at_commit_say_the_outcome_is_unknown(
    pg_store: Store, admin: Engine
) -> None:
    sid = pg_store.sessions.create_session(platform="slack", chat="C1", thread=None, now=T0).id
    kill_own_backend(pg_store.engine, admin, "commit", times=1)
    with pytest.raises(OutcomeUnknown, match="may or may not"):
        pg_store.heartbeats.set_heartbeat(
            sid, schedule=IntervalSchedule(60), schedule_text="every 60s", prompt="p", now=T0
        )


@pytest.mark.postgres
def test_a_database_that_keeps_dropping_is_a_store_error(pg_store: Store, admin: Engine) -> None:
    kill_own_backend(pg_store.engine, admin, "before_cursor_execute", times=100)
    with pytest.raises(StoreError, match="database connection") as info:
        pg_store.ledger.runs()
    assert "\n" not in str(info.value)


def test_finish_and_start_repeated_after_a_saved_commit_change_nothing(store: Store) -> None:
    """What a repeat after a COMMIT whose answer was lost meets: the first run already saved."""
    run_id, fence = started_run(store)
    [run] = store.ledger.runs()
    repeat = FireStart(1, lambda _: "p", 20)
    later = T0 + timedelta(seconds=62)
    again = store.ledger.begin_fire(run.session_id, fence, run.fire_id, 0, later, repeat).outcome
    assert isinstance(again, Started) and again.run == run
    assert again.message.text == "check CI"  # the prompt the first COMMIT stored
    first = finish(store, run_id, RunState.COMPLETED, fence, T0 + timedelta(seconds=70))
    second = finish(store, run_id, RunState.COMPLETED, fence, T0 + timedelta(seconds=71))
    assert second == first
    assert [m.role for m in store.messages.list_messages(run.session_id)] == ["user", "assistant"]


@pytest.mark.postgres
def test_folded_fire_steps_are_repeated_after_a_commit_cut_off(
    pg_store: Store, admin: Engine
) -> None:
    """begin_fire and finish_fire recognise their own saved COMMIT: one prompt, one reply."""
    sid = pg_store.sessions.create_session(platform="slack", chat="C1", thread="T1", now=T0).id
    pg_store.heartbeats.set_heartbeat(
        sid, schedule=IntervalSchedule(60), schedule_text="every 60s", prompt="p", now=T0
    )
    now = T0 + timedelta(seconds=61)
    killed = kill_own_backend(pg_store.engine, admin, "commit", times=1)
    begun = pg_store.ledger.begin_fire(sid, 1, f"{sid}:1", 1, now, FireStart(1, lambda _: "p", 20))
    assert killed() == 1 and isinstance(begun.outcome, Started)
    run_id = begun.outcome.run.key
    killed = kill_own_backend(pg_store.engine, admin, "commit", times=1)
    done = pg_store.ledger.finish_fire(
        run_id, RunState.COMPLETED, 1, now, reply="ok", reply_kind="assistant"
    )
    assert killed() == 1 and done.run.state == RunState.COMPLETED
    assert [m.role for m in pg_store.messages.list_messages(sid)] == ["user", "assistant"]


def _due_job(store: Store, chat: str) -> tuple[str, str, str, int]:
    """A session with a cron job every minute on its exact times, due at T0 + 60 s."""
    sid = store.sessions.create_session(platform="slack", chat=chat, thread="T1", now=T0).id
    parsed = parse_job_schedule("every 1m", now=T0, min_interval=60)
    job = store.jobs.create_job(NewJob(parsed, "every 1m exact", "p", JobRoute(session_id=sid)), T0)
    assert job.next_due is not None
    due_ms = to_ms(job.next_due)
    return sid, job.id, f"job:{job.id}:{due_ms}", due_ms


@pytest.mark.postgres
def test_a_job_runs_steps_are_repeated_after_a_commit_cut_off(
    pg_store: Store, admin: Engine
) -> None:
    """begin_job_fire (started, or given back at once) and finish_job_fire recognise their own
    saved COMMIT: one run counted once, one prompt, one reply."""
    sid, jid, fid, due_ms = _due_job(pg_store, "C1")
    now = T0 + timedelta(seconds=61)
    killed = kill_own_backend(pg_store.engine, admin, "commit", times=1)
    start = JobStart(1, lambda job: job.state.prompt, 20)
    begun = pg_store.jobs.begin_job_fire(sid, 1, jid, fid, due_ms, now, start)
    assert killed() == 1 and isinstance(begun.outcome, JobStarted)
    assert begun.job is not None and begun.job.state.fire_count == 1
    killed = kill_own_backend(pg_store.engine, admin, "commit", times=1)
    done = pg_store.jobs.finish_job_fire(
        begun.outcome.run.key, RunState.COMPLETED, 1, now, reply="ok", reply_kind="assistant"
    )
    assert killed() == 1 and done.run.state == RunState.COMPLETED
    assert [m.role for m in pg_store.messages.list_messages(sid)] == ["user", "assistant"]
    assert pg_store.jobs.job(jid).state.fire_count == 1
    sid, jid, fid, due_ms = _due_job(pg_store, "C2")
    killed = kill_own_backend(pg_store.engine, admin, "commit", times=1)
    stop = JobStart(1, lambda job: job.state.prompt, 20, refusal=RefundReason.EMERGENCY_STOP)
    refused = pg_store.jobs.begin_job_fire(sid, 1, jid, fid, due_ms, now, stop)
    assert killed() == 1 and isinstance(refused.outcome, JobNotStarted)
    assert refused.outcome.reason == RefundReason.EMERGENCY_STOP
    [run] = pg_store.jobs.job_runs(jid)
    assert run.state == RunState.REFUNDED and pg_store.jobs.job(jid).state.fire_count == 0
