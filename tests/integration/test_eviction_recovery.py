"""Keys an evicting Redis dropped under a running gateway are noticed and rebuilt within the
10 s recovery bound (issue 29, finding 7; docs/contract.md), with no duplicate, overlapping or
stale send.

The issue saw three classes evicted under ``allkeys-lru`` (accepted with
HBGW_REDIS_ACCEPT_EVICTION): session fence counters, liveness stamps and Celery's queue
bindings. Eviction is simulated by deleting exactly those keys on a real Redis, between real
beat ticks and a real Celery worker; the claim lease and the restore interval keep their
production defaults, so nothing but the recovery under test can bring a fire back in time.
"""

from __future__ import annotations

import time
from pathlib import Path

from support.harness import Gateway, gateway_settings, wait_until
from support.jobs import add_job, ago
from support.scenarios import assert_invariants

from hbgw.sessions.states import RunState

RECOVERY_BOUND_S = 10.0  # docs/contract.md, recovery bounds
PRODUCTION = {"claim_lease": 60.0, "restore_interval": 300.0}


def _completed(gw: Gateway, sid: str) -> int:
    return sum(1 for run in gw.runs(sid) if run.state == RunState.COMPLETED)


INTERVAL_S = 2  # each heartbeat fires every 2 s: the next fire is due at most 2 s away


def _start(gw: Gateway, sids: list[str]) -> None:
    """A heartbeat every INTERVAL_S on each session, due now; each has run once on return."""
    for sid in sids:
        gw.due_now(sid, seconds=INTERVAL_S)
    _wait_for_next_runs(gw, sids, dict.fromkeys(sids, 0))


def _wait_for_next_runs(gw: Gateway, sids: list[str], before: dict[str, int]) -> float:
    """Tick beat until each session has one more completed run; the seconds it took."""
    began = time.monotonic()

    def all_ran() -> bool:
        gw.tick()
        return all(_completed(gw, sid) > before[sid] for sid in sids)

    wait_until(all_ran, RECOVERY_BOUND_S, "every fire after the eviction to complete")
    return time.monotonic() - began


def _assert_sent_once_per_run(gw: Gateway, sid: str) -> None:
    sends = gw.deliveries(sid, "send")
    assert len(sends) == _completed(gw, sid), sends  # one send per completed run, no repeat


def test_an_evicted_fence_is_reseeded_from_sql_and_the_fire_runs_at_once(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """Before the fix the grant after an evicted fence got fence 1, SQL refused it
    (StaleFence, right) and the fire waited for its claim lease: a minute late. The bound
    counts from the eviction, the next fire due at most INTERVAL_S later."""
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **PRODUCTION)
    gw = Gateway(settings, redis_url)
    try:
        with gw.worker("w1"):
            sid = gw.session()
            _start(gw, [sid])
            floor = gw.store.ledger.max_fence(sid)
            assert floor >= 1
            assert gw.rt.client.delete(gw.rt.keys.fence(sid)) == 1  # evicted
            took = _wait_for_next_runs(gw, [sid], {sid: _completed(gw, sid)})
            assert took < RECOVERY_BOUND_S
            # Re-seeded from SQL's highest fence, never counted again from zero.
            assert gw.rt.gate.fence(sid) > floor
            assert [r.fence for r in gw.runs(sid) if r.state == RunState.COMPLETED][-1] > floor
            _assert_sent_once_per_run(gw, sid)
            assert_invariants(gw)
    finally:
        gw.close()


def test_every_evicted_key_class_is_rebuilt_within_the_bound(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """Fences of several sessions, the liveness stamps and the broker's queue bindings, all
    dropped at once: every session's next fire completes within the bound, each once."""
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **PRODUCTION)
    gw = Gateway(settings, redis_url)
    client = gw.rt.client
    try:
        with gw.worker("w1"):
            sids = [gw.session(chat=f"C{n}") for n in range(4)]
            _start(gw, sids)
            assert client.hlen(gw.rt.keys.liveness()) >= 1
            bindings = [
                key
                for key in client.scan_iter(f"{redis_ns}:celery:_kombu.binding*")
                if redis_ns in key
            ]
            assert bindings, "the worker's queue is bound in the broker"
            evicted = [gw.rt.keys.fence(sid) for sid in sids]
            evicted += [gw.rt.keys.liveness(), *bindings]
            assert client.delete(*evicted) == len(evicted)
            took = _wait_for_next_runs(gw, sids, {sid: _completed(gw, sid) for sid in sids})
            assert took < RECOVERY_BOUND_S
            # The turns after the eviction stamped again: the liveness hash is back.
            assert client.hlen(gw.rt.keys.liveness()) >= 1
            for sid in sids:
                _assert_sent_once_per_run(gw, sid)
            assert_invariants(gw)
    finally:
        gw.close()


def test_a_cron_job_behind_an_evicted_fence_runs_at_once(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """The same for a cron job's run in a session: before the fix it waited for the lease."""
    settings = gateway_settings(tmp_path, redis_url, redis_ns, **PRODUCTION)
    gw = Gateway(settings, redis_url)
    try:
        with gw.worker("w1"):
            sid = gw.session()
            job = add_job(gw, f"every {INTERVAL_S}s", session=sid, set_at=ago(INTERVAL_S + 1))
            wait_until(lambda: gw.tick() >= 0 and _job_done(gw, job.id) >= 1, 20, "a first run")
            floor = gw.store.ledger.max_fence(sid)
            assert gw.rt.client.delete(gw.rt.keys.fence(sid)) == 1  # evicted
            done = _job_done(gw, job.id)
            began = time.monotonic()
            wait_until(
                lambda: gw.tick() >= 0 and _job_done(gw, job.id) > done,
                RECOVERY_BOUND_S,
                "the job's run after the eviction",
            )
            assert time.monotonic() - began < RECOVERY_BOUND_S
            assert gw.rt.gate.fence(sid) > floor
            assert_invariants(gw)
    finally:
        gw.close()


def _job_done(gw: Gateway, job_id: str) -> int:
    return sum(1 for r in gw.store.jobs.job_runs(job_id) if r.state == RunState.COMPLETED)


def test_an_evicted_stamp_of_a_running_turn_is_back_within_a_renewal_period(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """Before the fix a turn in a long model call had no stamp from the eviction until its
    next step (here: 4 s later, the delivery; with a real model, minutes), so `hbgw agents` lost
    it and a stall of it could never be alerted. The lock renewals now write its last stamp
    back (HSETNX), within a renewal period (a third of the 2 s lease here)."""
    settings = gateway_settings(
        tmp_path, redis_url, redis_ns, agent="echo", echo_delay=4.0, **PRODUCTION
    )
    gw = Gateway(settings, redis_url)
    liveness = gw.rt.liveness
    try:
        with gw.worker("w1"):
            sid = gw.session()
            gw.due_now(sid, seconds=60)
            gw.tick()

            def running_stamp() -> object:
                mine = [s for s in liveness.all() if s.session == sid and s.phase != "idle"]
                return mine[0] if mine else None

            stamp = wait_until(running_stamp, 10, "the turn's stamp, in the agent")
            assert gw.rt.client.delete(gw.rt.keys.liveness()) == 1  # evicted
            back = wait_until(running_stamp, settings.lock_lease, "the stamp written back")
            assert back == stamp  # the same stamp, not a new one or a newer phase overwritten
            [run] = gw.final_runs(sid)
            assert run.state == RunState.COMPLETED
            final = [s for s in liveness.all() if s.session == sid]
            assert [s.phase for s in final] == ["idle"]  # the restore never outlives the turn
    finally:
        gw.close()
