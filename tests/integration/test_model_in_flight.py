"""One worker process holds many model calls at once, on its model loop, within a bound.

A real in-process worker (Celery threads pool, the turn runner, SQLite, Redis) against a
loopback endpoint that holds every call until the test lets go: N sessions due together, the
endpoint sees N calls at once. With HBGW_OPENAI_MAX_IN_FLIGHT below N it sees no more than the
bound, while every turn is inside its model call (their liveness stamps say "thinking").
Structural assertions on the endpoint's counts; no timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.harness import Gateway, gateway_settings, wait_until
from support.held_model import HeldModel
from support.http_server import serving

WAIT = 60.0  # seconds: a bound for a loaded machine, not a figure


@contextmanager
def held_gateway(
    tmp_path: Path, redis_url: str, redis_ns: str, **overrides: object
) -> Iterator[tuple[Gateway, HeldModel]]:
    endpoint = HeldModel()
    with serving(endpoint.app()) as url:
        settings = gateway_settings(
            tmp_path,
            redis_url,
            redis_ns,
            agent="openai",
            openai_base_url=f"{url}/v1",
            openai_model="held-model",
            openai_api_key="sk-test-key",
            # Held calls outlast the test's short lease: the renewals keep it.
            openai_timeout=WAIT * 2,
            **overrides,
        )
        gw = Gateway(settings, redis_url)
        try:
            yield gw, endpoint
        finally:
            endpoint.release()  # a failed assertion must not leave the worker's turns held
            gw.close()


def due_together(gw: Gateway, count: int) -> list[str]:
    sids = [gw.session(chat=f"C{i}") for i in range(count)]
    for sid in sids:
        gw.due_now(sid)
    gw.tick()  # one tick: every fire sent at once
    return sids


def thinking(gw: Gateway, sids: list[str]) -> bool:
    phases = {s.session: s.phase for s in gw.rt.liveness.all()}
    return all(phases.get(sid) == "thinking" for sid in sids)


def test_one_worker_holds_every_due_sessions_model_call_at_once(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    count = 24
    with held_gateway(tmp_path, redis_url, redis_ns) as (gw, endpoint):
        with gw.worker("w1", threads=count):
            sids = due_together(gw, count)
            wait_until(lambda: endpoint.in_flight == count, WAIT, f"{count} calls held at once")
            endpoint.release()
            for sid in sids:
                gw.final_runs(sid, timeout=WAIT)
        assert endpoint.most == count
        assert endpoint.answered == count


def test_the_in_flight_bound_caps_the_calls_the_endpoint_sees(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    count, bound = 12, 4
    overrides = {"openai_max_in_flight": bound}
    with held_gateway(tmp_path, redis_url, redis_ns, **overrides) as (gw, endpoint):
        with gw.worker("w1", threads=count):
            sids = due_together(gw, count)
            # Every turn is in its model call; only the bound's worth reached the endpoint.
            wait_until(lambda: thinking(gw, sids), WAIT, f"{count} turns asking the model")
            wait_until(lambda: endpoint.in_flight == bound, WAIT, f"{bound} calls held")
            assert endpoint.most == bound
            endpoint.release()
            for sid in sids:
                gw.final_runs(sid, timeout=WAIT)
        assert endpoint.most == bound
        assert endpoint.answered == count
