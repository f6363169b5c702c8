"""The OpenAI-compatible agent through real workers: real Celery, Redis and SQL, and a fake
Chat Completions endpoint under uvicorn on loopback. Heartbeats are backdated, never waited for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_fixtures import Hbgw
from support.fake_openai import Delay, Fail, FakeOpenAI, Text, ToolCall, openai_gateway, set_args
from support.harness import Gateway, wait_until
from support.scenarios import send

from hbgw.core.clock import to_ms
from hbgw.gateway.inbound import Queued
from hbgw.sessions.states import RunState
from hbgw.sessions.views import MessageView


@pytest.fixture
def openai_gw(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> Iterator[tuple[Gateway, FakeOpenAI]]:
    with openai_gateway(tmp_path, redis_url, redis_ns) as parts:
        yield parts


def answered(gw: Gateway, sid: str, text: str) -> MessageView:
    """Send a user message and wait for the stored message that answers it."""
    sent = send(gw, sid, text)
    assert isinstance(sent, Queued)
    reply: MessageView = wait_until(
        lambda: gw.store.messages.reply_for(sent.message_id), what="the reply"
    )
    return reply


def sent_texts(gw: Gateway, sid: str) -> list[tuple[str, str]]:
    return [(r["kind"], r["text"]) for r in gw.deliveries(sid, "send")]


def user_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_user_turn_with_a_tool_call_then_a_heartbeat_turn(
    openai_gw: tuple[Gateway, FakeOpenAI], hbgw: Hbgw
) -> None:
    gw, endpoint = openai_gw
    endpoint.then(ToolCall("get_heartbeat"), Text("It checks CI every minute."))
    endpoint.then(Text("CI is green.", prompt_tokens=40, completion_tokens=3))
    with gw.worker("w1"):
        sid = gw.session()
        gw.heartbeat(sid, seconds=60, prompt="check CI")
        reply = answered(gw, sid, "what does my heartbeat do?")
        gw.due_now(sid, prompt="check CI")
        gw.tick()
        [run] = gw.final_runs(sid)
    # The user turn: delivered, stored, and what it spent is on the reply.
    assert reply.kind == "assistant" and reply.text == "It checks CI every minute."
    assert (reply.prompt_tokens, reply.completion_tokens, reply.model) == (24, 12, "main-model")
    assert ("reply", "It checks CI every minute.") in sent_texts(gw, sid)
    # Every step stamped and showed progress; the heartbeat turn showed none (rule 8).
    progress = [r["text"] for r in gw.deliveries(sid, "progress")]
    assert progress == ["thinking", "tool:get_heartbeat", "thinking"]
    # The heartbeat turn: its cost is on its run, delivered to the origin.
    assert run.state == RunState.COMPLETED
    assert (run.prompt_tokens, run.completion_tokens, run.model) == (40, 3, "cheap-model")
    assert ("heartbeat", "CI is green.") in sent_texts(gw, sid)
    user_call, _, beat_call = endpoint.requests()
    # Rule 5: byte-identical system prompt and tools; the prompt once, as a plain user message.
    assert json.dumps(user_call["messages"][0]) == json.dumps(beat_call["messages"][0])
    assert json.dumps(user_call["tools"]) == json.dumps(beat_call["tools"])
    [injected] = [m for m in gw.store.messages.list_messages(sid) if m.kind == "heartbeat"]
    assert beat_call["messages"][-1] == {"role": "user", "content": injected.text}
    assert [m["content"] for m in beat_call["messages"]].count(injected.text) == 1
    assert user_messages(user_call) == ["what does my heartbeat do?"]
    assert user_messages(beat_call) == ["what does my heartbeat do?", injected.text]
    assert {t["function"]["name"] for t in user_call["tools"]} == {"get_heartbeat"}
    shown = hbgw("runs", sid, "--json")
    assert shown.code == 0, shown.err
    [row] = json.loads(shown.out)
    assert (row["prompt_tokens"], row["completion_tokens"], row["model"]) == (40, 3, "cheap-model")
    assert (row["delivery"]["state"], row["delivery"]["kind"]) == ("sent", "heartbeat")
    table = hbgw("runs", sid)
    assert "tokens in+out" in table.out and "40+3" in table.out
    header, line, per_day = table.out.splitlines()
    assert "delivery" in header and " delivered " in f"{line} "
    assert per_day.startswith("Heartbeat tokens per UTC day") and per_day.endswith(" 43")


def test_a_silent_heartbeat_sends_nothing(openai_gw: tuple[Gateway, FakeOpenAI]) -> None:
    gw, endpoint = openai_gw
    endpoint.then(Text("  [silent] "))
    with gw.worker("w1"):
        sid = gw.session()
        gw.due_now(sid)
        gw.tick()
        [run] = gw.final_runs(sid)
    assert run.state == RunState.SILENT
    assert run.prompt_tokens == 11  # silence costs tokens too
    assert gw.deliveries(sid, "send") == []


@pytest.mark.parametrize(
    "failure, words",
    [
        ((Fail(500), Fail(500)), "HTTP 500: scripted failure (2 attempts)"),
        ((Delay(2.0),), "did not answer within 0.5s"),
    ],
    ids=["http-500", "timeout"],
)
def test_a_failing_model_gives_failed_visible_turns(
    tmp_path: Path,
    redis_url: str,
    redis_ns: str,
    failure: tuple[Fail | Delay, ...],
    words: str,
) -> None:
    retries = len(failure) - 1
    with openai_gateway(
        tmp_path, redis_url, redis_ns, openai_timeout=0.5, openai_max_retries=retries
    ) as (gw, endpoint):
        endpoint.then(*failure, *failure)
        with gw.worker("w1"):
            sid = gw.session()
            reply = answered(gw, sid, "hello?")
            gw.due_now(sid)
            gw.tick()
            [run] = gw.final_runs(sid)
        assert len(endpoint.requests()) == 2 * len(failure)
    assert reply.kind == "notice"
    assert reply.text.startswith("⚠ The turn failed:") and words in reply.text
    assert run.state == RunState.FAILED
    sent = sent_texts(gw, sid)
    assert ("failure", reply.text) in sent
    assert any(kind == "failure" and text.startswith("⚠ Heartbeat failed:") for kind, text in sent)
    assert all("sk-test-key" not in text for _, text in sent)


def test_with_writes_enabled_a_user_turn_sets_the_heartbeat_visibly(
    tmp_path: Path, redis_url: str, redis_ns: str
) -> None:
    with openai_gateway(tmp_path, redis_url, redis_ns, agent_heartbeat_write=True) as (
        gw,
        endpoint,
    ):
        endpoint.then(ToolCall("set_heartbeat", set_args("every 10m", "check the build")))
        endpoint.then(Text("Done: every 10 minutes I will check the build."))
        with gw.worker("w1"):
            sid = gw.session()
            reply = answered(gw, sid, "please check the build every 10 minutes")
        state = gw.store.heartbeats.get_heartbeat(sid)
        due = gw.rt.index.due_ms(sid)
        [first] = endpoint.requests()[:1]
    assert state is not None and state.prompt == "check the build"
    next_due = state.next_due()
    assert next_due is not None and due == to_ms(next_due)
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["get_heartbeat", "set_heartbeat", "clear_heartbeat"]
    [notice] = [m for m in gw.store.messages.list_messages(sid) if m.kind == "notice"]
    assert notice.text.startswith("🔧 The agent changed this session's heartbeat: ♥ Heartbeat set")
    sent = sent_texts(gw, sid)
    assert sent.index(("notice", notice.text)) < sent.index(("reply", reply.text))
