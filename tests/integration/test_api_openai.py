"""The API over a gateway whose agent is a model: what a turn cost reaches the client.

Real uvicorn for the API and for a fake Chat Completions endpoint, real workers, Redis and SQL.
The heartbeat is backdated and beat's tick driven by the test, never waited for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.api_fixtures import ALICE, Api, EventReader, api_overrides
from support.fake_openai import FakeOpenAI, Text, ToolCall, openai_gateway
from support.harness import wait_until
from support.http_server import serving

from hbgw.gateway.api.app import create_app


@pytest.fixture
def model_api(tmp_path: Path, redis_url: str, redis_ns: str) -> Iterator[tuple[Api, FakeOpenAI]]:
    with openai_gateway(tmp_path, redis_url, redis_ns, **api_overrides()) as (gw, endpoint):
        app = create_app(gw.settings, celery_app=gw.app, redis_url=redis_url)
        with serving(app) as url:
            yield Api(url, gw), endpoint


def test_a_model_turn_and_a_heartbeat_show_their_tokens_through_the_api(
    model_api: tuple[Api, FakeOpenAI],
) -> None:
    api, endpoint = model_api
    gw = api.gw
    endpoint.then(ToolCall("get_heartbeat"), Text("It checks CI hourly.", prompt_tokens=30))
    endpoint.then(Text("CI is green.", prompt_tokens=40, completion_tokens=3))
    with gw.worker("w1"), api.owner(ALICE) as alice:
        wait_until(lambda: gw.rt.registry.live(gw.rt.now_ms()), 30, "a live worker")
        sid = api.new_session(alice)
        put = alice.put(
            f"/v1/sessions/{sid}/heartbeat", json={"schedule": "every 1h", "prompt": "check CI"}
        )
        assert put.status_code == 200, put.text
        with EventReader(alice, f"/v1/sessions/{sid}/events") as reader:
            alice.post(f"/v1/sessions/{sid}/messages", json={"text": "what is my heartbeat?"})
            wait_until(lambda: reader.of("message"), 30, "the reply event")
            gw.due_now(sid, prompt="check CI")
            gw.tick()
            wait_until(lambda: len(reader.of("message")) == 2, 30, "the heartbeat event")
        reply, beat = (e["data"] for e in reader.of("message"))
        runs = alice.get(f"/v1/sessions/{sid}/runs").json()["runs"]
    assert reply["text"] == "It checks CI hourly." and reply["heartbeat"] is False
    assert (reply["prompt_tokens"], reply["model"]) == (13 + 30, "main-model")  # two calls
    assert beat["text"] == "CI is green." and beat["heartbeat"] is True
    [run] = runs
    assert (run["prompt_tokens"], run["completion_tokens"], run["model"]) == (
        40,
        3,
        "cheap-model",
    )
