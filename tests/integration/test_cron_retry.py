"""The retry ladder of a job run whose model was unreachable, with real workers, beat and the fake
OpenAI endpoint: each failed attempt is a fire of its own in the ledger, nothing is said in the
chat until the ladder ends, the job is due again after the rung's delay (backdated here instead
of waited for); past the last rung the run has failed visibly and the job waits for its next
scheduled time. A refusal of the request itself (a 400) is not retried; a refused connection
is, like a 503."""

from __future__ import annotations

import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.fake_openai import Fail, FakeOpenAI, Text, openai_gateway
from support.harness import Gateway, gateway_settings, wait_until
from support.http_server import serving
from support.jobs import add_job, ago, backdate_retry
from support.tcp_proxy import tcp_proxy

from hbgw.core.clock import utcnow
from hbgw.sessions.states import RunState
from hbgw.sessions.views import RunView
from hbgw.workers.agents.openai_agent import unreachable

REQUEST: Any = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")  # refused
LADDER = {"openai_max_retries": 0, "job_retry_delays": "60,300,900"}


def attempts(gw: Gateway, job_id: str, count: int) -> list[RunView]:
    """The job's runs once ``count`` of them ended, each time letting beat fire what is due."""

    def ended() -> list[RunView] | None:
        gw.tick()
        runs = [r for r in gw.store.jobs.job_runs(job_id) if r.finished_at is not None]
        return runs if len(runs) >= count else None

    return wait_until(ended, 30, f"{count} runs of {job_id}")  # type: ignore[no-any-return]


def test_503s_climb_the_ladder_then_the_run_completes(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with openai_gateway(tmp_path, redis_url, redis_ns, **LADDER) as (gw, endpoint):
        endpoint.then(Fail(503), Fail(503), Text("deployed"))
        with gw.worker("w1"):
            job = add_job(gw, "every 1h", "deploy", set_at=ago(3601))
            [first] = attempts(gw, job.id, 1)
            assert first.state == RunState.FAILED and "retry 1 of 3" in (first.detail or "")
            waiting = gw.store.jobs.job(job.id)
            assert waiting.state.retries == 1 and waiting.state.fire_count == 0
            planned = backdate_retry(gw, job.id)
            assert first.finished_at is not None
            assert timedelta(seconds=55) < planned - first.finished_at < timedelta(seconds=65)
            [_, second] = attempts(gw, job.id, 2)
            assert "retry 2 of 3" in (second.detail or "")
            planned = backdate_retry(gw, job.id)
            assert second.finished_at is not None
            assert timedelta(seconds=295) < planned - second.finished_at < timedelta(seconds=305)
            runs = attempts(gw, job.id, 3)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.FAILED, RunState.COMPLETED]
        assert len({r.fire_id for r in runs}) == 3  # each retry a fire of its own
        done = gw.store.jobs.job(job.id)
        assert done.state.fire_count == 1 and done.state.retries == 0
        assert done.next_due is not None and done.next_due > utcnow() + timedelta(minutes=59)
        sent = [d for d in gw.deliveries() if d["call"] == "send"]
        assert [d["text"] for d in sent] == ["deployed"]  # the ladder said nothing in the chat
        assert len(endpoint.requests()) == 3


def test_past_the_last_rung_the_run_fails_and_the_job_waits(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    values = {**LADDER, "job_retry_delays": "60"}
    with openai_gateway(tmp_path, redis_url, redis_ns, **values) as (gw, endpoint):
        endpoint.then(Fail(503), Fail(502))
        with gw.worker("w1"):
            job = add_job(gw, "every 1h", "deploy", set_at=ago(3601))
            attempts(gw, job.id, 1)
            backdate_retry(gw, job.id)
            runs = attempts(gw, job.id, 2)
            gw.tick()
        assert [r.state for r in runs] == [RunState.FAILED, RunState.FAILED]
        after = gw.store.jobs.job(job.id)
        assert after.state.retries == 0 and after.state.retry_at is None
        assert after.next_due is not None and after.next_due > utcnow() + timedelta(minutes=59)
        [notice] = [d for d in gw.deliveries() if d["call"] == "send"]
        assert notice["text"].startswith(f"⚠ Cron job {job.id} failed:") and "502" in notice["text"]
        assert len(gw.store.jobs.job_runs(job.id)) == 2  # never a third


def test_a_refused_request_is_not_retried(tmp_path: Path, redis_url: str, redis_ns: str) -> None:
    with openai_gateway(tmp_path, redis_url, redis_ns, **LADDER) as (gw, endpoint):
        endpoint.then(Fail(400))
        with gw.worker("w1"):
            job = add_job(gw, "in 1s", "deploy", set_at=ago(2))
            [run] = attempts(gw, job.id, 1)
        assert run.state == RunState.FAILED and gw.store.jobs.job(job.id).status == "completed"
        assert gw.store.jobs.job(job.id).state.retries == 0


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (openai.APIConnectionError(request=REQUEST), True),
        (openai.APITimeoutError(request=REQUEST), True),
    ],
)
def test_connection_refused_and_timeouts_are_unreachable(
    exc: openai.OpenAIError, expected: bool
) -> None:
    assert unreachable(exc) is expected


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_retried_then_the_run_completes(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    """The model's address refuses connections (the proxy in front of it finds nobody), then
    the endpoint is back: the retry completes the run."""
    endpoint = FakeOpenAI().then(Text("deployed"))
    with serving(endpoint.app()) as url, tcp_proxy("127.0.0.1", _closed_port()) as proxy:
        settings = gateway_settings(
            tmp_path,
            redis_url,
            redis_ns,
            agent="openai",
            openai_base_url=f"http://127.0.0.1:{proxy.port}/v1",
            openai_model="main-model",
            openai_api_key="sk-test-key",
            **LADDER,
        )
        gw = Gateway(settings, redis_url)
        try:
            with gw.worker("w1"):
                job = add_job(gw, "every 1h", "deploy", set_at=ago(3601))
                [first] = attempts(gw, job.id, 1)
                assert "could not be reached" in (first.detail or "")
                proxy.target = ("127.0.0.1", int(url.rsplit(":", 1)[1]))  # the endpoint is back
                backdate_retry(gw, job.id)
                runs = attempts(gw, job.id, 2)
        finally:
            gw.close()
    assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]
    assert [d["text"] for d in gw.deliveries() if d["call"] == "send"] == ["deployed"]
