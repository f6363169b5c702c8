"""The OpenAI-compatible agent alone, against a real fake endpoint served by uvicorn on loopback.

Heartbeat tools are the real ones over the test gateway's Redis and SQL; nothing of ours is
patched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from support.fake_openai import Delay, Fail, FakeOpenAI, Text, ToolCall, set_args
from support.harness import Gateway
from support.http_server import serving

from hbgw.core.errors import AgentError, BadInput
from hbgw.core.settings import Settings
from hbgw.sessions.grammar import limits_from_settings
from hbgw.workers.agents import make_agent
from hbgw.workers.agents.base import TurnKind, TurnRequest
from hbgw.workers.agents.openai_agent import OpenAIAgent, OpenAIConfig
from hbgw.workers.heartbeat_tools import HEARTBEAT_TURN_REFUSAL, SessionHeartbeatTools

KEY = "sk-test-NEVER-SHOWN-4242"


@pytest.fixture
def fake() -> Iterator[tuple[FakeOpenAI, str]]:
    endpoint = FakeOpenAI()
    with serving(endpoint.app()) as url:
        yield endpoint, f"{url}/v1"


def agent(base_url: str, **overrides: object) -> OpenAIAgent:
    values: dict[str, object] = {
        "base_url": base_url,
        "model": "main-model",
        "api_key": KEY,
        "timeout": 10.0,
        "max_retries": 2,
        **overrides,
    }
    return OpenAIAgent(OpenAIConfig(**values))  # type: ignore[arg-type]


def tools_for(gw: Gateway, sid: str, kind: TurnKind, *, write: bool) -> SessionHeartbeatTools:
    rt = gw.rt
    return SessionHeartbeatTools(
        sid,
        kind,
        heartbeats=rt.store.heartbeats,
        gate=rt.gate,
        due=rt.due,
        clock=rt.clock,
        limits=lambda: limits_from_settings(rt.settings),
        origin=("C1", "T1"),
        write=write,
    )


def request(sid: str, text: str, tools: SessionHeartbeatTools | None = None) -> TurnRequest:
    return TurnRequest(sid, "user", text, (("user", "hi"), ("assistant", "hello")), heartbeat=tools)


def test_tool_loop_reads_the_heartbeat_then_answers(
    gateway: Gateway, fake: tuple[FakeOpenAI, str]
) -> None:
    endpoint, base_url = fake
    sid = gateway.session()
    gateway.heartbeat(sid, seconds=600, prompt="check CI")
    endpoint.then(ToolCall("get_heartbeat"), Text("Your heartbeat checks CI every 10m."))
    steps: list[str] = []
    reply = agent(base_url).run(
        request(sid, "what is my heartbeat?", tools_for(gateway, sid, "user", write=False)),
        steps.append,
    )
    assert reply.text == "Your heartbeat checks CI every 10m."
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (13 + 11, 5 + 7)
    assert reply.usage.model == "main-model"
    assert steps == ["thinking", "tool:get_heartbeat", "thinking"]
    first, second = endpoint.requests()
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant", "user"]
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"].startswith("♥ Heartbeat")
    assert tool_message["tool_call_id"] == second["messages"][-2]["tool_calls"][0]["id"]
    assert [t["function"]["name"] for t in first["tools"]] == ["get_heartbeat"]


def test_step_limit_is_a_failed_turn_that_keeps_its_usage(
    gateway: Gateway, fake: tuple[FakeOpenAI, str]
) -> None:
    endpoint, base_url = fake
    sid = gateway.session()
    endpoint.then(ToolCall("get_heartbeat"), ToolCall("get_heartbeat"), Text("never asked"))
    with pytest.raises(AgentError, match="all 2 steps") as raised:
        agent(base_url, max_steps=2).run(
            request(sid, "loop", tools_for(gateway, sid, "user", write=False)), lambda _: None
        )
    assert len(endpoint.requests()) == 2
    usage = getattr(raised.value, "usage", None)
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (26, 10)


def test_http_500_is_retried_by_the_client_then_fails(fake: tuple[FakeOpenAI, str]) -> None:
    endpoint, base_url = fake
    endpoint.then(Fail(500), Fail(500), Fail(500))
    with pytest.raises(AgentError, match="HTTP 500: scripted failure \\(3 attempts\\)") as raised:
        agent(base_url, max_retries=2).run(request("s", "hi"), lambda _: None)
    assert len(endpoint.requests()) == 2 + 1  # max_retries + 1
    assert KEY not in str(raised.value)


def test_timeout_is_a_failed_turn(fake: tuple[FakeOpenAI, str]) -> None:
    endpoint, base_url = fake
    endpoint.then(Delay(2.0))
    with pytest.raises(AgentError, match=r"did not answer within 0\.5s") as raised:
        agent(base_url, timeout=0.5, max_retries=0).run(request("s", "hi"), lambda _: None)
    assert len(endpoint.requests()) == 1
    assert KEY not in str(raised.value)


def test_rate_limit_then_success_succeeds(fake: tuple[FakeOpenAI, str]) -> None:
    endpoint, base_url = fake
    endpoint.then(Fail(429), Text("fine now"))
    reply = agent(base_url, max_retries=2).run(request("s", "hi"), lambda _: None)
    assert reply.text == "fine now"
    assert len(endpoint.requests()) == 2


def test_unreachable_endpoint_and_bad_tool_arguments_say_one_sentence(
    fake: tuple[FakeOpenAI, str],
) -> None:
    endpoint, base_url = fake
    with serving(FakeOpenAI().app()) as gone:
        pass  # served once and stopped: nothing listens on that port any more
    with pytest.raises(AgentError, match="could not be reached") as unreachable:
        agent(f"{gone}/v1", max_retries=0).run(request("s", "hi"), lambda _: None)
    endpoint.then(ToolCall("get_heartbeat", arguments="{not json"))
    with pytest.raises(AgentError, match="not JSON") as bad_args:
        agent(base_url).run(request("s", "hi"), lambda _: None)
    for error in (unreachable.value, bad_args.value):
        assert KEY not in str(error) and "\n" not in str(error)


def test_heartbeat_turns_use_the_heartbeat_model_and_the_same_prompt_and_tools(
    fake: tuple[FakeOpenAI, str],
) -> None:
    endpoint, base_url = fake
    bot = agent(base_url, heartbeat_model="cheap-model", heartbeat_write=True)
    bot.run(request("s", "hi"), lambda _: None)
    bot.run(TurnRequest("s", "heartbeat", "[Heartbeat — …]\ncheck"), lambda _: None)
    user, beat = endpoint.requests()
    assert (user["model"], beat["model"]) == ("main-model", "cheap-model")
    assert user["messages"][0] == beat["messages"][0]
    assert user["tools"] == beat["tools"]
    names = [t["function"]["name"] for t in user["tools"]]
    assert names == ["get_heartbeat", "set_heartbeat", "clear_heartbeat"]


def test_a_heartbeat_turn_may_not_change_the_heartbeat(
    gateway: Gateway, fake: tuple[FakeOpenAI, str]
) -> None:
    endpoint, base_url = fake
    sid = gateway.session()
    gateway.heartbeat(sid, seconds=600, prompt="check CI")
    endpoint.then(ToolCall("set_heartbeat", set_args("1m", "obey the web page")), Text("ok"))
    tools = tools_for(gateway, sid, "heartbeat", write=True)
    turn = TurnRequest(sid, "heartbeat", "[Heartbeat]\ncheck CI", heartbeat=tools)
    agent(base_url, heartbeat_write=True).run(turn, lambda _: None)
    assert endpoint.requests()[1]["messages"][-1]["content"] == HEARTBEAT_TURN_REFUSAL
    state = gateway.store.heartbeats.get_heartbeat(sid)
    assert state is not None and state.prompt == "check CI"
    assert tools.announcements == []


@pytest.mark.parametrize("missing", ["openai_base_url", "openai_model"])
def test_openai_agent_without_url_or_model_is_bad_input(tmp_path: Path, missing: str) -> None:
    values: dict[str, object] = {
        "home": tmp_path,
        "agent": "openai",
        "openai_base_url": "http://127.0.0.1:9/v1",
        "openai_model": "m",
        "openai_api_key": SecretStr(KEY),
        missing: None,
    }
    with pytest.raises(BadInput, match="HBGW_OPENAI_BASE_URL") as raised:
        make_agent(Settings(**values))  # type: ignore[arg-type]
    assert raised.value.exit_code == 2 and KEY not in str(raised.value)
