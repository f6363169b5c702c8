"""Issue 20, item 4: the OpenAI-compatible agent against a local model server (Ollama, llama.cpp's
server, vLLM) — no API key, a model that cannot call tools, the endpoint's own refusal in the
sentence and the log. The endpoint is a real loopback HTTP server reached through the official
`openai` client, answering as those servers do."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_openai import Fail, FakeOpenAI, Text
from support.http_server import serving

from hbgw.core.errors import AgentError
from hbgw.core.settings import Settings
from hbgw.workers.agents import make_agent
from hbgw.workers.agents.base import TurnRequest
from hbgw.workers.agents.command import CommandAgent
from hbgw.workers.agents.openai_agent import REASON_CHARS, OpenAIAgent

ROOT = Path(__file__).resolve().parents[2]
# Ollama's OpenAI-compatible route, for a model without tool support (its exact words).
NO_TOOLS = "registry.ollama.ai/library/gemma:2b does not support tools"


@pytest.fixture
def local() -> Iterator[tuple[FakeOpenAI, str]]:
    endpoint = FakeOpenAI()
    with serving(endpoint.app()) as url:
        yield endpoint, f"{url}/v1"


def local_agent(base_url: str, **settings: object) -> OpenAIAgent:
    """As the docs set it up: base URL and model, no key, no client retries for a refusal."""
    values = {"agent": "openai", "openai_base_url": base_url, "openai_model": "gemma:2b"}
    agent = make_agent(Settings(**{**values, "openai_max_retries": 0, **settings}))  # type: ignore[arg-type]
    assert isinstance(agent, OpenAIAgent)
    return agent


def ask(agent: OpenAIAgent, kind: str = "user", text: str = "hi") -> str:
    return agent.run(TurnRequest("s1", kind, text), lambda _: None).text  # type: ignore[arg-type]


def test_no_api_key_is_needed(local: tuple[FakeOpenAI, str]) -> None:
    endpoint, base_url = local
    endpoint.then(Text("hello from a local model"))
    assert ask(local_agent(base_url)) == "hello from a local model"
    # The client insists on a key; a local server gets a stand-in that is nobody's secret.
    assert endpoint.authorizations == ["Bearer unused"]
    assert endpoint.requests()[0]["tools"][0]["function"]["name"] == "get_heartbeat"


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": NO_TOOLS, "type": "api_error", "param": None, "code": None}},
        {"error": NO_TOOLS},  # Ollama's native shape
    ],
    ids=["openai-shape", "ollama-shape"],
)
def test_a_refusal_says_the_endpoints_reason_in_the_sentence_and_the_log(
    local: tuple[FakeOpenAI, str], body: object, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint, base_url = local
    endpoint.then(Fail(400, body))
    with caplog.at_level(logging.WARNING, "hbgw.agent"), pytest.raises(AgentError) as failed:
        ask(local_agent(base_url))
    host = base_url.split("//")[1].split("/")[0]
    assert str(failed.value) == f"The model endpoint at {host} answered HTTP 400: {NO_TOOLS}."
    [record] = [r for r in caplog.records if r.name == "hbgw.agent"]
    assert NO_TOOLS in record.getMessage()
    assert getattr(record, "action", None) == "agent.model_failed"


def test_a_reason_is_one_bounded_line_without_the_key(local: tuple[FakeOpenAI, str]) -> None:
    endpoint, base_url = local
    key = "sk-local-0123456789"
    endpoint.then(Fail(401, {"error": {"message": f"bad key {key}\n\x1b[31m" + "x" * 900}}))
    endpoint.then(Fail(400, {"detail": "not the error shape"}), Fail(400, "plain words"))
    agent = local_agent(base_url, openai_api_key=key)
    with pytest.raises(AgentError) as long_one:
        ask(agent)
    sentence = str(long_one.value)
    assert key not in sentence and "bad key ***" in sentence
    assert "\n" not in sentence and "\x1b" not in sentence
    reason = sentence.split("HTTP 401: ", 1)[1]
    assert len(reason) <= REASON_CHARS + 1 and reason.endswith("….")
    for _ in range(2):  # bodies without a reason: the status alone, as before
        with pytest.raises(AgentError, match=r"answered HTTP 400\.$"):
            ask(agent)


def test_without_tools_both_kinds_of_turn_send_none(local: tuple[FakeOpenAI, str]) -> None:
    endpoint, base_url = local
    endpoint.then(Text("a reply"), Text("[SILENT]"))
    agent = local_agent(base_url, openai_tools=False, openai_heartbeat_model="gemma:2b")
    ask(agent, "user", "same words")
    ask(agent, "heartbeat", "same words")
    user, heartbeat = endpoint.requests()
    assert "tools" not in user and "tools" not in heartbeat
    assert user == heartbeat  # rule 5: a heartbeat turn is an ordinary user turn


def _section(doc: str, heading: str) -> str:
    text = (ROOT / doc).read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else None]


def test_the_local_model_docs_name_real_settings() -> None:
    section = _section("docs/operations.md", "### A local model")
    names = set(re.findall(r"HBGW_[A-Z_]+", section))
    assert {"HBGW_OPENAI_BASE_URL", "HBGW_OPENAI_MODEL", "HBGW_OPENAI_TOOLS"} <= names
    fields = {f"HBGW_{name.upper()}" for name in Settings.model_fields}
    assert names <= fields, names - fields
    for port in ("11434", "8080", "8000"):  # Ollama, llama.cpp's server, vLLM
        assert f"127.0.0.1:{port}/v1" in section


def test_the_command_agents_documented_protocol_is_what_it_does(tmp_path: Path) -> None:
    section = _section("docs/operations.md", "## The command agent")
    names = set(re.findall(r"HBGW_[A-Z_]+", section))
    fields = {f"HBGW_{name.upper()}" for name in Settings.model_fields}
    turn_data = {"HBGW_TURN_KIND", "HBGW_TURN_SESSION"}
    assert turn_data <= names and names - turn_data <= fields, names - turn_data - fields
    for word in ("stdin", "stdout", "exit"):
        assert word in section
    script = tmp_path / "agent.sh"
    script.write_text('#!/bin/sh\nread line\necho "$HBGW_TURN_KIND $HBGW_TURN_SESSION: $line"\n')
    script.chmod(0o755)
    agent = CommandAgent(str(script), timeout=10)
    reply = agent.run(TurnRequest("s9", "heartbeat", "check the deploy"), lambda _: None)
    assert reply.text == "heartbeat s9: check the deploy"
    assert set(agent.child_env(TurnRequest("s9", "user", "x"))) <= {
        *turn_data,
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
    }
