"""The per-owner quotas kept by the store (issue 29, finding 6), on SQLite and PostgreSQL: a
session, a heartbeat or a cron job beyond HBGW_API_MAX_*_PER_OWNER is refused by the step that
would add it, whoever calls it; the operator's store is not held; two creations racing for the
last slot do not both pass; a routed cron job's runs leave no session that counts (issue 29,
low)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from hbgw.core.clock import to_ms, utcnow
from hbgw.core.errors import QuotaExceeded
from hbgw.sessions.grammar import IntervalSchedule
from hbgw.sessions.grammar.job_schedule import parse_job_schedule
from hbgw.sessions.quotas import OwnerQuotas
from hbgw.sessions.store import Store
from hbgw.sessions.views import JobRoute, JobStart, JobStarted, NewJob

QUOTAS = OwnerQuotas(sessions=2, heartbeats=1, jobs=1)
START = JobStart(1, lambda job: job.state.prompt, 5, worker="w1")


@pytest.fixture
def held(migrated_engine: Engine) -> Iterator[Store]:
    """A store holding owners to ``QUOTAS``, as the API and the workers build theirs."""
    yield Store(migrated_engine, QUOTAS)


def _session(store: Store, chat: str, owner: str = "bob") -> str:
    return store.sessions.create_session(platform="api", chat=chat, owner=owner, now=utcnow()).id


def _set(store: Store, sid: str) -> None:
    store.heartbeats.set_heartbeat(
        sid, schedule=IntervalSchedule(600), schedule_text="every 10m", prompt="p", now=utcnow()
    )


def _job(store: Store, route: JobRoute, schedule: str = "every 1h", *, ago: float = 0) -> str:
    at = utcnow() - timedelta(seconds=ago)
    parsed = parse_job_schedule(schedule, now=at, min_interval=60)
    new = NewJob(parsed, f"{schedule} exact", "p", route, owner="bob")
    return store.jobs.create_job(new, at).id


def test_sessions_beyond_the_quota_are_refused_on_every_creating_step(held: Store) -> None:
    """Finding 6: a platform's inbound (``session_at``) made sessions past the API's count."""
    _session(held, "a")
    found = held.sessions.session_at(
        platform="telegram", chat="-100", thread="1", now=utcnow(), owner="bob"
    )
    assert found is not None
    with pytest.raises(QuotaExceeded, match=r"2 sessions.*HBGW_API_MAX_SESSIONS_PER_OWNER"):
        held.sessions.session_at(
            platform="telegram", chat="-100", thread="2", now=utcnow(), owner="bob"
        )
    with pytest.raises(QuotaExceeded):
        _session(held, "b")
    again = held.sessions.session_at(
        platform="telegram", chat="-100", thread="1", now=utcnow(), owner="bob"
    )
    assert again is not None and again.id == found.id  # an existing session is found, not made
    assert len(held.sessions.list_sessions(owner="bob")) == 2  # nothing stored by a refusal
    _session(held, "c", owner="alice")  # another owner's quota is its own
    _session(held.operator, "d")  # the operator (admin token) is not held
    held.sessions.compress(found.id, utcnow())  # a compression adds none


def test_heartbeats_beyond_the_quota_are_refused(held: Store) -> None:
    """Finding 6: the model's tool, webhook and Telegram commands set heartbeats past it."""
    first, second = _session(held, "a"), _session(held, "b")
    _set(held, first)
    _set(held, first)  # replacing its own adds none
    with pytest.raises(QuotaExceeded, match=r"1 heartbeats.*HBGW_API_MAX_HEARTBEATS_PER_OWNER"):
        _set(held, second)
    assert held.heartbeats.get_heartbeat(second) is None
    held.heartbeats.pause_heartbeat(first, utcnow())
    with pytest.raises(QuotaExceeded):  # a paused heartbeat still counts
        _set(held, second)
    held.heartbeats.clear_heartbeat(first, utcnow())
    _set(held, second)  # a cleared one frees its slot
    with pytest.raises(QuotaExceeded):  # and setting the cleared one again needs one
        _set(held, first)


def test_cron_jobs_beyond_the_quota_are_refused(held: Store) -> None:
    """Finding 6: the quota of cron jobs was checked by the API route and /cron add only."""
    route = JobRoute(platform="slack", chat="C1")
    first = _job(held, route)
    with pytest.raises(QuotaExceeded, match=r"1 cron jobs.*HBGW_API_MAX_JOBS_PER_OWNER"):
        _job(held, route)
    held.jobs.pause_job(first, utcnow())
    with pytest.raises(QuotaExceeded):  # a paused job still counts
        _job(held, route)
    held.jobs.cancel_job(first, utcnow())
    _job(held, route)


def test_a_routed_jobs_runs_leave_no_session_that_counts(held: Store) -> None:
    """Issue 29, low: each run of a routed job left an active session that counted against
    the owner's session quota."""
    job_id = _job(held, JobRoute(platform="slack", chat="C1"), schedule="in 1m", ago=61)
    job = held.jobs.job(job_id)
    assert job.next_due is not None
    fid, now = f"job:{job.id}:{to_ms(job.next_due)}", utcnow()
    [seen] = held.jobs.admit_jobs([(job.id, fid)])
    assert seen is not None
    fresh = seen.target(fid, now)
    assert fresh is not None
    begun = held.jobs.begin_job_fire(fresh.id, 1, job.id, fid, to_ms(job.next_due), now, START)
    assert isinstance(begun.outcome, JobStarted)
    _session(held, "a")
    _session(held, "b")  # both slots are the owner's own sessions', the run's aside


def _race(attempts: int, create: Callable[[int], None]) -> int:
    """Run ``attempts`` creations at once (a barrier lines them up); how many passed."""
    barrier = threading.Barrier(attempts)
    passed: list[int] = []
    refused: list[BaseException] = []

    def one(n: int) -> None:
        barrier.wait()
        try:
            create(n)
        except QuotaExceeded as exc:
            refused.append(exc)
            return
        passed.append(n)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(attempts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(passed) + len(refused) == attempts
    return len(passed)


def test_creations_racing_for_the_last_slot_do_not_both_pass(held: Store) -> None:
    """Finding 6: a count, then an insert, let concurrent creations at the limit all pass."""
    for round_ in range(3):
        owner = f"racer{round_}"
        _session(held, "first", owner=owner)

        def another_session(n: int, owner: str = owner) -> None:
            _session(held, f"c{n}", owner=owner)

        assert _race(6, another_session) == 1
        sids = [s.id for s in held.sessions.list_sessions(owner=owner)]
        assert len(sids) == 2

        def a_heartbeat(n: int, sids: list[str] = sids) -> None:
            _set(held, sids[n])

        assert _race(2, a_heartbeat) == 1
