"""The cron-job store for chats, the quota and the retry ladder, on SQLite and PostgreSQL: the job
list paged by a cursor and filtered to what reaches one chat, a routed
run's fresh session (made by its begin, as admission saw it, once for a fire delivered twice)
never found as the chat's conversation, and a run given back to the ladder (due at its retry
time, the run count as before) until a run ends for good."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.errors import BadInput
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.states import RunState
from hbgw.sessions.store import Store
from hbgw.sessions.store.job_turns import run_session_id
from hbgw.sessions.views import Duplicate, JobRoute, JobStart, JobStarted, JobView, NewJob

HERE = JobRoute(platform="slack", chat="C1", thread="T1")
START = JobStart(1, lambda job: job.state.prompt, 5, worker="w1")


def _job(store: Store, schedule: str, at: datetime, route: JobRoute = HERE) -> JobView:
    parsed = parse_job_schedule(schedule, now=at, min_interval=60)
    text = f"{schedule} exact"  # on its exact times: backdated by one period, it is due
    return store.jobs.create_job(NewJob(parsed, text, "p", route, owner="alice"), at)


def test_the_list_pages_by_cursor_and_filters_to_a_chat(store: Store) -> None:
    at = utcnow()
    made = [_job(store, "every 1h", at + timedelta(seconds=n)).id for n in range(3)]
    elsewhere = _job(store, "every 1h", at, JobRoute(platform="slack", chat="C2")).id
    first = store.jobs.jobs(owner="alice", route=HERE, limit=2)
    assert [j.id for j in first] == made[:2]
    rest = store.jobs.jobs(owner="alice", route=HERE, limit=2, after=first[-1].id)
    assert [j.id for j in rest] == made[2:]
    assert elsewhere not in [j.id for j in store.jobs.jobs(route=HERE)]
    assert store.jobs.jobs(owner="bob") == []
    with pytest.raises(BadInput, match="is not a job id"):
        store.jobs.jobs(after="j-nope")


def test_a_runs_fresh_session_is_not_the_chats_conversation(store: Store) -> None:
    at = utcnow() - timedelta(seconds=61)
    chat = store.sessions.session_at(
        platform="slack", chat="C1", thread="T1", now=at, owner="alice"
    )
    assert chat is not None
    job = _job(store, "in 1m", at)
    due = job.next_due
    assert due is not None
    fid, now = f"job:{job.id}:{to_ms(due)}", utcnow()
    [seen] = store.jobs.admit_jobs([(job.id, fid)])
    assert seen is not None and seen.session is None  # nothing read: the begin makes it
    fresh = seen.target(fid, now)
    assert fresh is not None and fresh.id == run_session_id(fid)
    begun = store.jobs.begin_job_fire(fresh.id, 1, job.id, fid, to_ms(due), now, START)
    assert isinstance(begun.outcome, JobStarted)
    assert store.sessions.get_session(fresh.id) == replace(fresh, fence=1)  # as admission saw it
    # A repeat after its COMMIT was cut off finds the session and its own run; a second
    # delivery of the fire (a newer grant) finds them too, a duplicate.
    repeat = store.jobs.begin_job_fire(fresh.id, 1, job.id, fid, to_ms(due), now, START)
    assert isinstance(repeat.outcome, JobStarted)
    assert repeat.outcome.run.id == begun.outcome.run.id
    again = store.jobs.begin_job_fire(fresh.id, 2, job.id, fid, to_ms(due), utcnow(), START)
    assert isinstance(again.outcome, Duplicate)
    assert again.outcome.run.id == begun.outcome.run.id
    found = store.sessions.session_at(
        platform="slack", chat="C1", thread="T1", now=utcnow(), owner="alice"
    )
    assert found is not None and found.id == chat.id != fresh.id


def test_a_run_given_back_to_the_ladder_is_due_at_its_retry(store: Store) -> None:
    at = utcnow() - timedelta(seconds=61)
    job = _job(store, "in 1m", at)
    due = job.next_due
    assert due is not None
    fid, now = f"job:{job.id}:{to_ms(due)}", utcnow()
    sid = run_session_id(fid)
    started = store.jobs.begin_job_fire(sid, 1, job.id, fid, to_ms(due), now, START).outcome
    assert isinstance(started, JobStarted)
    retry_at = now + timedelta(minutes=1)
    back = store.jobs.retry_job_fire(
        started.run.key, 1, now, detail="model unreachable", notice="n", usage=None,
        retry_at=retry_at,
    )  # fmt: skip
    assert back.run.state == RunState.FAILED
    assert back.job.next_due == retry_at and back.job.status == "active"
    assert (back.job.state.fire_count, back.job.state.retries) == (0, 1)
    again = store.jobs.retry_job_fire(
        started.run.key, 1, now, detail="x", notice="n", usage=None, retry_at=retry_at
    )  # a repeat after a lost answer changes nothing
    assert again.job.state.retries == 1
